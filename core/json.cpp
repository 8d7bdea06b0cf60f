// JSON value accessors, the strict recursive-descent parser, and the printer (exact integers, shortest doubles).
#include "core/json.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/utf8.h"

namespace uoe::json {

namespace {

constexpr int kMaxDepth = 512;
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

void append_utf8(std::string& out, uint32_t cp) {
  static constexpr unsigned char kLead[] = {0, 0x00, 0xC0, 0xE0, 0xF0};
  const int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  out += char(kLead[n] | (cp >> (6 * (n - 1))));
  for (int k = n - 2; k >= 0; --k) out += char(0x80 | ((cp >> (6 * k)) & 0x3F));
}

// Characters with a two-character escape (\" \\ \/ \b \f \n \r \t): raw form and escape letter.
constexpr char kEscRaw[] = "\"\\/\b\f\n\r\t";
constexpr char kEscLetter[] = "\"\\/bfnrt";

void dump_string(std::string& out, const std::string& s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_length(s, i);
      UOE_CHECK(n > 0, "[json] cannot write a string that is not valid UTF-8 (byte 0x", hex[c >> 4], hex[c & 15],
                " at offset ", i, ")");
      out.append(s, i, n);
      i += n;
      continue;
    }
    const char* e = c && c != '/' ? std::strchr(kEscRaw, c) : nullptr;
    if (e) {
      out += '\\';
      out += kEscLetter[e - kEscRaw];
    } else if (c < 0x20) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
    ++i;
  }
  out += '"';
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

// ---- parser -----------------------------------------------------------------------------------

class Parser {
 public:
  Parser(const std::string& text, const std::string& source) : t_(text), source_(source) {}

  Value parse_document() {
    if (t_.compare(0, 3, "\xEF\xBB\xBF") == 0) pos_ = 3;  // a UTF-8 byte order mark is ignored
    skip_ws();
    Value v = parse_value();
    skip_ws();
    if (pos_ != t_.size()) error(pos_, "expected end of input after the JSON value, got ", describe(pos_));
    return v;
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(size_t at, const Args&... args) const {
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < at && i < t_.size(); ++i)
      if (t_[i] == '\n') ++line, line_start = i + 1;
    fail("[json] ", source_, ":", line, ":", at - line_start + 1, ": ", args...);
  }

  std::string describe(size_t at) const {
    if (at >= t_.size()) return "end of input";
    const unsigned char c = static_cast<unsigned char>(t_[at]);
    if (c >= 0x20 && c < 0x7f) return std::string("'") + char(c) + "'";
    static const char* hex = "0123456789abcdef";
    return std::string("byte 0x") + hex[c >> 4] + hex[c & 15];
  }

  bool at_end() const { return pos_ >= t_.size(); }
  char peek() const { return at_end() ? '\0' : t_[pos_]; }
  bool is_digit(size_t at) const { return at < t_.size() && t_[at] >= '0' && t_[at] <= '9'; }

  void skip_ws() {
    while (!at_end() && (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r')) ++pos_;
  }

  Value parse_value() {
    if (at_end()) error(pos_, "expected a value, got end of input");
    switch (t_[pos_]) {
      case '{': return parse_object();
      case '[': return parse_array();
      case '"': return Value(parse_string());
      case 't': expect_word("true"); return Value(true);
      case 'f': expect_word("false"); return Value(false);
      case 'n': expect_word("null"); return Value();
      default:
        if (t_[pos_] == '-' || is_digit(pos_)) return parse_number();
        error(pos_, "expected a value (object, array, string, number, true, false or null), got ", describe(pos_));
    }
  }

  void expect_word(const char* w) {
    const size_t n = std::strlen(w);
    for (size_t i = 0; i < n; ++i)
      if (pos_ + i >= t_.size() || t_[pos_ + i] != w[i])
        error(pos_ + i, "expected '", w, "', got ", describe(pos_ + i));
    pos_ += n;
  }

  void enter(size_t at) {
    if (++depth_ > kMaxDepth) error(at, "expected at most ", kMaxDepth, " levels of nested arrays and objects");
  }

  Value parse_array() {
    enter(pos_);
    ++pos_;  // '['
    Value v = Value::array();
    skip_ws();
    for (bool first = true; !(first && peek() == ']'); first = false) {
      skip_ws();
      if (peek() == ']') error(pos_, "expected a value after ',', got ']' (trailing commas are not JSON)");
      v.arr_.push_back(parse_value());
      skip_ws();
      if (peek() == ',') { ++pos_; continue; }
      if (peek() == ']') break;
      error(pos_, "expected ',' or ']' in array, got ", describe(pos_));
    }
    ++pos_;  // ']'
    --depth_;
    return v;
  }

  Value parse_object() {
    enter(pos_);
    ++pos_;  // '{'
    Value v = Value::object();
    skip_ws();
    for (bool first = true; !(first && peek() == '}'); first = false) {
      skip_ws();
      if (peek() != '"') {
        if (v.obj_.empty()) error(pos_, "expected a string key or '}' in object, got ", describe(pos_));
        error(pos_, "expected a string key after ',' in object, got ", describe(pos_));
      }
      const size_t key_pos = pos_;
      std::string key = parse_string();
      if (v.index_.count(key)) error(key_pos, "duplicate key \"", key, "\" in object");
      skip_ws();
      if (peek() != ':') error(pos_, "expected ':' after key \"", key, "\", got ", describe(pos_));
      ++pos_;
      skip_ws();
      Value item = parse_value();
      v.index_.emplace(key, v.obj_.size());
      v.obj_.emplace_back(std::move(key), std::move(item));
      skip_ws();
      if (peek() == ',') { ++pos_; continue; }
      if (peek() == '}') break;
      error(pos_, "expected ',' or '}' in object, got ", describe(pos_));
    }
    ++pos_;  // '}'
    --depth_;
    return v;
  }

  uint32_t parse_hex4() {
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9') d = uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') d = uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = uint32_t(c - 'A' + 10);
      else error(pos_, "expected 4 hex digits after \\u, got ", describe(pos_));
      cp = cp * 16 + d;
      ++pos_;
    }
    return cp;
  }

  std::string parse_string() {
    const size_t start = pos_;
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      // Copy a run of plain ASCII characters at once.
      size_t run = pos_;
      while (run < t_.size()) {
        const unsigned char c = static_cast<unsigned char>(t_[run]);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++run;
      }
      out.append(t_, pos_, run - pos_);
      pos_ = run;
      if (at_end()) error(start, "expected '\"' to close this string, got end of input");
      const unsigned char c = static_cast<unsigned char>(t_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20)
        error(pos_, "expected no raw control characters in a string (write \\n, \\t or \\u00XX), got ", describe(pos_));
      if (c >= 0x80) {
        const size_t n = utf8_length(t_, pos_);
        if (n == 0) error(pos_, "expected valid UTF-8 in string, got ", describe(pos_));
        out.append(t_, pos_, n);
        pos_ += n;
        continue;
      }
      // Escape sequence.
      const size_t esc = pos_;
      ++pos_;
      const char e = peek();
      ++pos_;
      if (const char* l = e ? std::strchr(kEscLetter, e) : nullptr) {
        out += kEscRaw[l - kEscLetter];
        continue;
      }
      if (e != 'u')
        error(esc, "expected an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX) after '\\', got ", describe(esc + 1));
      uint32_t cp = parse_hex4();
      if (cp >= 0xDC00 && cp <= 0xDFFF)
        error(esc, "expected a high surrogate before low surrogate \\u", t_.substr(esc + 2, 4));
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (t_.compare(pos_, 2, "\\u") != 0)
          error(pos_, "expected \\uDC00-\\uDFFF after high surrogate \\u", t_.substr(esc + 2, 4), ", got ",
                describe(pos_));
        const size_t low_pos = pos_;
        pos_ += 2;
        const uint32_t lo = parse_hex4();
        if (lo < 0xDC00 || lo > 0xDFFF)
          error(low_pos, "expected a low surrogate \\uDC00-\\uDFFF after high surrogate \\u", t_.substr(esc + 2, 4),
                ", got \\u", t_.substr(low_pos + 2, 4));
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      }
      append_utf8(out, cp);
    }
  }

  Value parse_number() {
    const size_t start = pos_;
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (!is_digit(pos_)) error(pos_, "expected a digit after '-', got ", describe(pos_));
    const size_t int_start = pos_;
    if (t_[pos_] == '0') {
      ++pos_;
      if (is_digit(pos_)) error(start, "expected no leading zeros in a number, got ", describe(pos_));
    } else {
      while (is_digit(pos_)) ++pos_;
    }
    const size_t int_end = pos_;
    size_t frac_start = pos_, frac_end = pos_;
    bool integral = true;
    if (peek() == '.') {
      integral = false;
      ++pos_;
      if (!is_digit(pos_)) error(pos_, "expected a digit after '.', got ", describe(pos_));
      frac_start = pos_;
      while (is_digit(pos_)) ++pos_;
      frac_end = pos_;
    }
    int64_t exponent = 0;
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos_;
      bool neg_exp = false;
      if (peek() == '+' || peek() == '-') neg_exp = t_[pos_++] == '-';
      if (!is_digit(pos_)) error(pos_, "expected a digit in the exponent, got ", describe(pos_));
      while (is_digit(pos_)) {
        if (exponent < 1000000000) exponent = exponent * 10 + (t_[pos_] - '0');  // saturates
        ++pos_;
      }
      if (neg_exp) exponent = -exponent;
    }
    const char* first = t_.data() + start;
    const char* last = t_.data() + pos_;
    if (integral) {
      int64_t i;
      auto r = std::from_chars(first, last, i);
      if (r.ec == std::errc() && r.ptr == last) return Value(i);
      uint64_t u;
      r = std::from_chars(first, last, u);
      if (!negative && r.ec == std::errc() && r.ptr == last) return Value(u);
    }
    double d;
    auto r = std::from_chars(first, last, d);
    if (r.ec == std::errc::result_out_of_range) {
      // Overflow when the leading significant digit is at a power of ten >= 0, else underflow to 0.
      int64_t power = -1;
      bool nonzero = false;
      for (size_t i = int_start; i < int_end && !nonzero; ++i)
        if (t_[i] != '0') nonzero = true, power = int64_t(int_end - i) - 1;
      for (size_t i = frac_start; i < frac_end && !nonzero; ++i)
        if (t_[i] != '0') nonzero = true, power = -int64_t(i - frac_start) - 1;
      if (nonzero && power + exponent >= 0)
        error(start, "expected a number within the range of a double, got ", t_.substr(start, pos_ - start));
      return Value(negative ? -0.0 : 0.0);
    }
    if (r.ec != std::errc() || r.ptr != last) error(start, "expected a number, got ", t_.substr(start, pos_ - start));
    return Value(d);
  }

  const std::string& t_;
  const std::string& source_;
  size_t pos_ = 0;
  int depth_ = 0;
};

Value parse(const std::string& text, const std::string& source) { return Parser(text, source).parse_document(); }

Value read_file(const std::string& path) { return parse(read_file_bytes(path), path); }

}  // namespace uoe::json
