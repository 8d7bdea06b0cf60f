// JSON: an ordered JSON value type, a strict parser with line:col errors, and a printer with exact numbers.
//
// The parser is nlohmann-json's (a private dependency of core/json.cpp: nothing here includes it), read through its
// SAX interface straight into uoe's own Value. Value stays because its callers want what nlohmann::json does not
// give: typed getters whose errors name the key (`get("lr", 1e-3)`), a missing-key error listing the keys there
// are, exact int64/uint64 next to doubles, and a printer whose doubles are the shortest of %.15g/%.16g/%.17g that
// reads back (the format config.json, trainer_state.json and metrics.jsonl have always had) and which refuses NaN.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace uoe::json {

// null, bool, number, string, array or object. Objects keep their keys in insertion order.
// Numbers keep integers exactly: an integer is stored as int64 (or uint64 above INT64_MAX),
// never through double; other numbers are doubles.
class Value {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : type_(Type::Bool), b_(b) {}
  Value(int v) : Value(int64_t(v)) {}
  Value(int64_t v) : type_(Type::Number), num_(Num::Int), i_(v) {}
  Value(uint64_t v);
  Value(double v) : type_(Type::Number), num_(Num::Double), d_(v) {}
  Value(const char* s) : type_(Type::String), s_(s) {}
  Value(std::string s) : type_(Type::String), s_(std::move(s)) {}
  // Other integer types (unsigned, long long, size_t on some platforms, ...), stored exactly.
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, int> &&
                                 !std::is_same_v<T, int64_t> && !std::is_same_v<T, uint64_t>,
                             int> = 0>
  Value(T v) : Value(std::is_signed_v<T> ? Value(int64_t(v)) : Value(uint64_t(v))) {}

  static Value array();
  static Value object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_number() const { return type_ == Type::Number; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }
  // True for numbers stored as integers (parsed without fraction or exponent, or built from one).
  bool is_integer() const { return type_ == Type::Number && num_ != Num::Double; }

  bool as_bool() const;
  double as_double() const;
  int64_t as_int() const;   // the number must be integral and fit in int64
  uint64_t as_uint() const; // the number must be integral and fit in uint64
  const std::string& as_string() const;
  const std::vector<Value>& as_array() const;
  std::vector<Value>& as_array();

  bool contains(const std::string& key) const;             // false for non-objects
  const Value& at(const std::string& key) const;           // the error names the missing key
  Value& operator[](const std::string& key);               // inserts null when missing; null becomes an object
  const std::vector<std::pair<std::string, Value>>& items() const;  // object members in order
  void push_back(Value v);                                 // arrays; null becomes an array
  size_t size() const;                                     // array / object size, 0 for null

  // Typed getters with defaults for config files: a missing key (or a null value, or a null
  // `this`) gives `def`; a value of the wrong type raises an error naming the key and the type.
  double get(const std::string& key, double def) const;
  int64_t get(const std::string& key, int64_t def) const;
  int64_t get(const std::string& key, int def) const { return get(key, int64_t(def)); }
  bool get(const std::string& key, bool def) const;
  std::string get(const std::string& key, const std::string& def) const;
  std::string get(const std::string& key, const char* def) const { return get(key, std::string(def)); }

  // Compact (indent < 0) or pretty-printed with `indent` spaces per level. Integers print
  // exactly; doubles as the first of %.15g, %.16g, %.17g that reads back to the same bits
  // (always with a '.' or an exponent, so they parse back as doubles); NaN and infinities raise an error.
  std::string dump(int indent = -1) const;

  // Deep equality; numbers compare by mathematical value (1 == 1.0), objects ignore key order.
  bool operator==(const Value& o) const;
  bool operator!=(const Value& o) const { return !(*this == o); }

 private:
  enum class Num : uint8_t { Int, UInt, Double };
  void dump_to(std::string& out, int indent, int level) const;
  const Value* find(const std::string& key) const;
  const Value* lookup(const std::string& key) const;  // for get(): null or missing -> nullptr
  void check_type(Type t, const char* what) const;

  Type type_ = Type::Null;
  Num num_ = Num::Int;
  union {
    bool b_;
    int64_t i_;
    uint64_t u_;
    double d_ = 0;
  };
  std::string s_;
  std::vector<Value> arr_;
  std::vector<std::pair<std::string, Value>> obj_;
  std::unordered_map<std::string, size_t> index_;  // object key -> position in obj_
};

const char* type_name(Value::Type t);  // "null", "bool", "number", "string", "array", "object"

// Parses one JSON document (RFC 8259, with nlohmann-json: escapes, \u with surrogate pairs -> UTF-8, exponents,
// UTF-8 checked). Rejects trailing garbage, duplicate object keys and nesting deeper than 512 (an error, not a deep
// recursion, however deep the input). Errors read "[json] <source>:<line>:<col>: <what was found and what was
// expected>", e.g. "syntax error while parsing array - unexpected '}'; expected ']'".
Value parse(const std::string& text, const std::string& source = "json");
// Reads and parses a file; errors name the path.
Value read_file(const std::string& path);

}  // namespace uoe::json
