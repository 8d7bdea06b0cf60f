// JSON value accessors and the printer (exact integers, shortest round-trip doubles; strings escaped by nlohmann-json).
// The parser is core/json_parse.cpp.
#include "core/json.h"

#include <bit>
#include <charconv>
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/utf8.h"

namespace uoe::json {

namespace {

constexpr double kTwo63 = 9223372036854775808.0;   // 2^63
constexpr double kTwo64 = 18446744073709551616.0;  // 2^64

// A short, printable rendering of a value for error messages.
std::string preview(const Value& v) {
  std::string s;
  try {
    s = v.dump();
  } catch (const Error&) {
    s = v.is_number() ? std::to_string(v.as_double()) : std::string("<unprintable>");
  }
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// nlohmann's messages start with an id, and a parse error with its own position ("[json.exception.parse_error.101]
// parse error at line 1, column 8: syntax error while parsing ..."): keep what follows them, cut to a readable
// length (a lexer error quotes the token it read, which can be a whole long string), with the bytes that are not
// UTF-8 (which it quotes raw) written as <0xff>.
std::string nlohmann_message(const std::exception& e) {
  std::string m = e.what();
  if (const size_t id_end = m.find("] "); id_end != std::string::npos) m.erase(0, id_end + 2);
  if (m.rfind("parse error", 0) == 0) m.erase(0, m.find(": ") + 2);
  if (m.size() > 200) m = m.substr(0, 197) + "...";
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < m.size();) {
    if (const size_t n = utf8_length(m, i)) {
      out.append(m, i, n);
      i += n;
    } else {
      const unsigned char c = static_cast<unsigned char>(m[i++]);
      out += std::string("<0x") + hex[c >> 4] + hex[c & 15] + ">";
    }
  }
  return out;
}

// nlohmann's escaping is JSON's (\" \\ \b \f \n \r \t, other control characters as \u00xx, the rest as is), and it
// refuses a string that is not valid UTF-8.
void dump_string(std::string& out, const std::string& s) {
  try {
    out += nlohmann::json(s).dump();
  } catch (const nlohmann::json::type_error& e) {
    fail("[json] cannot write a string that is not valid UTF-8: ", nlohmann_message(e));
  }
}

void dump_double(std::string& out, double d) {
  UOE_CHECK(std::isfinite(d), "[json] cannot write ", d, ": JSON has no NaN or infinity");
  // The shortest of %.15g, %.16g, %.17g that reads back to the same bits (%.17g always does);
  // std::to_chars is printf's %g without the C locale's influence on the decimal point.
  char buf[64];
  std::string s;
  for (int precision = 15; precision <= 17; ++precision) {
    const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::general, precision);
    double back = 0;
    std::from_chars(buf, r.ptr, back);
    s.assign(buf, r.ptr);
    if (std::bit_cast<uint64_t>(back) == std::bit_cast<uint64_t>(d)) break;
  }
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";  // keep it a double when read back
  out += s;
}

}  // namespace

const char* type_name(Value::Type t) {
  switch (t) {
    case Value::Type::Null: return "null";
    case Value::Type::Bool: return "bool";
    case Value::Type::Number: return "number";
    case Value::Type::String: return "string";
    case Value::Type::Array: return "array";
    case Value::Type::Object: return "object";
  }
  return "?";
}

// ---- construction and access ------------------------------------------------------------------

Value::Value(uint64_t v) : type_(Type::Number) {
  const bool fits = v <= uint64_t(std::numeric_limits<int64_t>::max());  // canonical: int64 when it fits
  num_ = fits ? Num::Int : Num::UInt;
  if (fits) i_ = int64_t(v);
  else u_ = v;
}

Value Value::array() { Value v; v.type_ = Type::Array; return v; }  
Value Value::object() { Value v; v.type_ = Type::Object; return v; }

void Value::check_type(Type t, const char* what) const {
  UOE_CHECK(type_ == t, "[json] expected ", what, ", got ", type_name(type_), " ", preview(*this));
}

bool Value::as_bool() const { return check_type(Type::Bool, "a bool"), b_; }

double Value::as_double() const {
  check_type(Type::Number, "a number");
  switch (num_) {
    case Num::Int: return double(i_);
    case Num::UInt: return double(u_);
    case Num::Double: return d_;
  }
  return 0;
}

int64_t Value::as_int() const {
  check_type(Type::Number, "an integer");
  if (num_ == Num::Int) return i_;
  if (num_ == Num::Double && d_ == std::floor(d_) && d_ >= -kTwo63 && d_ < kTwo63) return int64_t(d_);
  fail("[json] expected an integer in the int64 range, got ", preview(*this));
}

uint64_t Value::as_uint() const {
  check_type(Type::Number, "an unsigned integer");
  if (num_ == Num::Int && i_ >= 0) return uint64_t(i_);
  if (num_ == Num::UInt) return u_;
  if (num_ == Num::Double && d_ == std::floor(d_) && d_ >= 0 && d_ < kTwo64) return uint64_t(d_);
  fail("[json] expected a non-negative integer in the uint64 range, got ", preview(*this));
}

const std::string& Value::as_string() const { return check_type(Type::String, "a string"), s_; }
const std::vector<Value>& Value::as_array() const { return check_type(Type::Array, "an array"), arr_; }
std::vector<Value>& Value::as_array() { return check_type(Type::Array, "an array"), arr_; }

const Value* Value::find(const std::string& key) const {
  if (type_ != Type::Object) return nullptr;
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &obj_[it->second].second;
}

bool Value::contains(const std::string& key) const { return find(key) != nullptr; }

const Value& Value::at(const std::string& key) const {
  UOE_CHECK(type_ == Type::Object, "[json] cannot look up key \"", key, "\" in a ", type_name(type_));
  if (const Value* v = find(key)) return *v;
  std::string keys;
  for (size_t i = 0; i < obj_.size() && i < 8; ++i) keys += (i ? ", " : "") + obj_[i].first;
  if (obj_.size() > 8) keys += ", ...";
  fail("[json] missing key \"", key, "\" (the object has ", obj_.empty() ? "no keys" : "keys: " + keys, ")");
}

Value& Value::operator[](const std::string& key) {
  if (type_ == Type::Null) type_ = Type::Object;
  UOE_CHECK(type_ == Type::Object, "[json] cannot set key \"", key, "\" on a ", type_name(type_));
  auto it = index_.find(key);
  if (it != index_.end()) return obj_[it->second].second;
  index_.emplace(key, obj_.size());
  obj_.emplace_back(key, Value());
  return obj_.back().second;
}

const std::vector<std::pair<std::string, Value>>& Value::items() const {
  return check_type(Type::Object, "an object"), obj_;
}

void Value::push_back(Value v) {
  if (type_ == Type::Null) type_ = Type::Array;
  UOE_CHECK(type_ == Type::Array, "[json] push_back needs an array, got ", type_name(type_));
  arr_.push_back(std::move(v));
}

size_t Value::size() const {
  switch (type_) {
    case Type::Null: return 0;
    case Type::Array: return arr_.size();
    case Type::Object: return obj_.size();
    default: fail("[json] size() needs an array or an object, got ", type_name(type_));
  }
}

// ---- typed getters with defaults --------------------------------------------------------------

const Value* Value::lookup(const std::string& key) const {
  if (is_null()) return nullptr;
  UOE_CHECK(is_object(), "[json] cannot read key \"", key, "\" from a ", type_name(type_));
  const Value* v = find(key);
  return v && !v->is_null() ? v : nullptr;
}

double Value::get(const std::string& key, double def) const {
  const Value* v = lookup(key);
  if (!v) return def;
  UOE_CHECK(v->is_number(), "[json] key \"", key, "\": expected a number, got ", type_name(v->type()), " ",
            preview(*v));
  return v->as_double();
}

int64_t Value::get(const std::string& key, int64_t def) const {
  const Value* v = lookup(key);
  if (!v) return def;
  UOE_CHECK(v->is_number(), "[json] key \"", key, "\": expected an integer, got ", type_name(v->type()), " ",
            preview(*v));
  const bool ok = v->num_ == Num::Int ||
                  (v->num_ == Num::Double && v->d_ == std::floor(v->d_) && v->d_ >= -kTwo63 && v->d_ < kTwo63);
  UOE_CHECK(ok, "[json] key \"", key, "\": expected an integer in the int64 range, got ", preview(*v));
  return v->as_int();
}

bool Value::get(const std::string& key, bool def) const {
  const Value* v = lookup(key);
  if (!v) return def;
  UOE_CHECK(v->is_bool(), "[json] key \"", key, "\": expected a bool (true or false), got ", type_name(v->type()),
            " ", preview(*v));
  return v->b_;
}

std::string Value::get(const std::string& key, const std::string& def) const {
  const Value* v = lookup(key);
  if (!v) return def;
  UOE_CHECK(v->is_string(), "[json] key \"", key, "\": expected a string, got ", type_name(v->type()), " ",
            preview(*v));
  return v->s_;
}

// ---- equality and printing --------------------------------------------------------------------

bool Value::operator==(const Value& o) const {
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::Null: return true;
    case Type::Bool: return b_ == o.b_;
    case Type::String: return s_ == o.s_;
    case Type::Array: return arr_ == o.arr_;
    case Type::Object: {
      if (obj_.size() != o.obj_.size()) return false;
      for (const auto& [k, v] : obj_) {
        const Value* w = o.find(k);
        if (!w || !(v == *w)) return false;
      }
      return true;
    }
    case Type::Number: {
      if (num_ == o.num_) return num_ == Num::Int ? i_ == o.i_ : num_ == Num::UInt ? u_ == o.u_ : d_ == o.d_;
      if (num_ != Num::Double && o.num_ != Num::Double) return false;  // int64 and > INT64_MAX never meet
      const Value& d = num_ == Num::Double ? *this : o;
      const Value& n = num_ == Num::Double ? o : *this;
      if (d.d_ != std::floor(d.d_)) return false;
      if (n.num_ == Num::Int) return d.d_ >= -kTwo63 && d.d_ < kTwo63 && int64_t(d.d_) == n.i_;
      return d.d_ >= 0 && d.d_ < kTwo64 && uint64_t(d.d_) == n.u_;
    }
  }
  return false;
}

void Value::dump_to(std::string& out, int indent, int level) const {
  const auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(size_t(indent) * size_t(lvl), ' ');
  };
  switch (type_) {
    case Type::Null: out += "null"; break;
    case Type::Bool: out += b_ ? "true" : "false"; break;
    case Type::String: dump_string(out, s_); break;
    case Type::Number:
      if (num_ == Num::Int) out += std::to_string(i_);
      else if (num_ == Num::UInt) out += std::to_string(u_);
      else dump_double(out, d_);
      break;
    case Type::Array:
      out += '[';
      for (size_t i = 0; i < arr_.size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        arr_[i].dump_to(out, indent, level + 1);
      }
      if (!arr_.empty()) newline(level);
      out += ']';
      break;
    case Type::Object:
      out += '{';
      for (size_t i = 0; i < obj_.size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        dump_string(out, obj_[i].first);
        out += indent < 0 ? ":" : ": ";
        obj_[i].second.dump_to(out, indent, level + 1);
      }
      if (!obj_.empty()) newline(level);
      out += '}';
      break;
  }
}

std::string Value::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

// ---- parser: nlohmann-json's SAX reader, building the Value -----------------------------------

namespace {

constexpr size_t kMaxDepth = 512;

// A pointer into the text that records how far nlohmann's lexer has read, so that an error found while building
// (a duplicate key, nesting too deep) can say where it is.
struct TrackedCursor {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  const char& operator*() const { return *at; }
  TrackedCursor& operator++() {
    *read_up_to = ++at;
    return *this;
  }
  bool operator==(const TrackedCursor& o) const { return at == o.at; }

  const char* at;
  const char** read_up_to;
};

// Builds the document as nlohmann's parser reports it, without recursion: `open_` holds the arrays and objects not
// closed yet. Their addresses stay valid: only the innermost open container grows.
class DocumentBuilder final : public nlohmann::json_sax<nlohmann::json> {
 public:
  DocumentBuilder(const std::string& text, const std::string& source)
      : text_(text), source_(source), read_up_to_(text.data()) {}

  Value parse() {
    const TrackedCursor first{text_.data(), &read_up_to_}, last{text_.data() + text_.size(), &read_up_to_};
    nlohmann::json::sax_parse(first, last, this);  // every error raises from a callback below
    return std::move(root_);
  }

  bool null() override { return add(Value()); }
  bool boolean(bool b) override { return add(Value(b)); }
  bool number_integer(number_integer_t i) override { return add(Value(int64_t(i))); }
  bool number_unsigned(number_unsigned_t u) override { return add(Value(uint64_t(u))); }
  bool number_float(number_float_t d, const string_t&) override { return add(Value(double(d))); }
  bool string(string_t& s) override { return add(Value(std::move(s))); }
  bool binary(binary_t&) override { return false; }  // binary values exist only in binary formats, never in JSON
  bool start_object(std::size_t) override { return open(Value::object()); }
  bool key(string_t& k) override {
    if (open_.back()->contains(k)) error(read_offset(), "duplicate key \"", k, "\" in object");
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Value::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t chars_read, const std::string&, const nlohmann::detail::exception& e) override {
    error(chars_read ? chars_read - 1 : 0, nlohmann_message(e));  // the last character read is the unexpected one
  }

 private:
  // Where the next value goes: the document, a new array element, or the member named by the last key.
  Value& slot() {
    if (open_.empty()) return root_;
    Value& parent = *open_.back();
    if (parent.is_object()) return parent[key_];
    parent.push_back(Value());
    return parent.as_array().back();
  }
  bool add(Value v) {
    slot() = std::move(v);
    return true;
  }
  bool open(Value container) {
    if (open_.size() == kMaxDepth)
      error(read_offset(), "expected at most ", kMaxDepth, " levels of nested arrays and objects");
    Value& s = slot();
    s = std::move(container);
    open_.push_back(&s);
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  size_t read_offset() const { return size_t(std::max(read_up_to_ - text_.data(), std::ptrdiff_t(1))) - 1; }

  template <typename... Args>
  [[noreturn]] void error(size_t offset, const Args&... args) const {
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < offset && i < text_.size(); ++i)
      if (text_[i] == '\n') ++line, line_start = i + 1;
    fail("[json] ", source_, ":", line, ":", offset - line_start + 1, ": ", args...);
  }

  const std::string& text_;
  const std::string& source_;
  const char* read_up_to_;  // one past the last character the lexer read
  Value root_;
  std::vector<Value*> open_;
  std::string key_;
};

}  // namespace

Value parse(const std::string& text, const std::string& source) { return DocumentBuilder(text, source).parse(); }

Value read_file(const std::string& path) { return parse(read_file_bytes(path), path); }

}  // namespace uoe::json
