// Strict XML well-formedness checker for tests (see xml_check.h for what it accepts).
#include "xml_check.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>

#include "core/utf8.h"

namespace uoe::test {
namespace {

struct XmlError {
  std::string what;
};

// The UTF-8 bytes of a code point.
std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

class XmlParser {
 public:
  explicit XmlParser(const std::string& text) : s_(text) {}

  XmlCheck run() {
    XmlCheck result;
    try {
      characters();
      document();
    } catch (const XmlError& e) {
      result.error =
          "line " + std::to_string(1 + std::count(s_.begin(), s_.begin() + long(pos_), '\n')) + ": " + e.what;
    }
    result.elements = std::move(elements_);
    return result;
  }

 private:
  [[noreturn]] void fail(const std::string& what) { throw XmlError{what}; }
  bool at_end() const { return pos_ >= s_.size(); }
  bool starts(const char* token) const { return s_.compare(pos_, std::strlen(token), token) == 0; }
  void skip_space() {
    while (!at_end() && std::strchr(" \t\r\n", s_[pos_])) ++pos_;
  }
  void expect(const char* token) {
    if (!starts(token)) fail(std::string("expected '") + token + "'");
    pos_ += std::strlen(token);
  }

  // Every character is valid UTF-8 and an XML 1.0 Char: no control character but tab, LF and CR, no U+FFFE or U+FFFF.
  void characters() {
    for (pos_ = 0; !at_end();) {
      const size_t len = utf8_length(s_, pos_);
      const auto c = static_cast<unsigned char>(s_[pos_]);
      if (len == 0) fail("byte " + std::to_string(c) + " is not valid UTF-8");
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') fail("control character " + std::to_string(c));
      if (len == 3 && s_.compare(pos_, 2, "\xEF\xBF") == 0 && static_cast<unsigned char>(s_[pos_ + 2]) >= 0xBE)
        fail("U+FFFE or U+FFFF, which XML does not allow");
      pos_ += len;
    }
    pos_ = 0;
  }

  // [?xml ...?] misc* root misc*, where misc is white space, a comment or (before the root) a doctype
  void document() {
    if (starts("<?xml")) skip_past("?>", "an unterminated <?xml ...?> declaration");
    bool seen_root = false;
    for (skip_space(); !at_end(); skip_space()) {
      if (starts("<!--"))
        comment();
      else if (starts("<!DOCTYPE")) {
        if (seen_root) fail("a <!DOCTYPE> after the root element");
        doctype();
      } else if (starts("<?"))
        fail("a processing instruction other than a leading <?xml ...?>");
      else if (s_[pos_] == '<' && !seen_root) {
        element();
        seen_root = true;
      } else
        fail(seen_root ? "content after the root element" : "text before the root element");
    }
    if (!seen_root) fail("no root element");
  }

  void skip_past(const char* end, const char* what) {
    const size_t at = s_.find(end, pos_);
    if (at == std::string::npos) fail(what);
    pos_ = at + std::strlen(end);
  }

  void comment() {
    const size_t begin = pos_ + 4, end = s_.find("-->", begin);
    if (end == std::string::npos) fail("an unterminated comment");
    if (s_.find("--", begin) < end) fail("'--' inside a comment");
    pos_ = end + 3;
  }

  void doctype() {
    const size_t end = s_.find('>', pos_);
    if (end == std::string::npos) fail("an unterminated <!DOCTYPE");
    if (s_.find('[', pos_) < end) fail("a <!DOCTYPE> with an internal subset (not supported)");
    pos_ = end + 1;
  }

  static bool name_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' || static_cast<unsigned char>(c) >= 0x80;
  }
  std::string name() {
    if (at_end() || !name_start(s_[pos_])) fail("expected a name");
    const size_t begin = pos_;
    while (!at_end() && (name_start(s_[pos_]) || std::isdigit(static_cast<unsigned char>(s_[pos_])) ||
                         s_[pos_] == '-' || s_[pos_] == '.'))
      ++pos_;
    return s_.substr(begin, pos_ - begin);
  }

  // At '&': one of the five predefined entities or a numeric character reference; returns the text it stands for.
  std::string reference() {
    static const std::pair<const char*, const char*> kEntities[] = {
        {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}, {"&quot;", "\""}, {"&apos;", "'"}};
    for (const auto& [entity, text] : kEntities)
      if (starts(entity)) {
        pos_ += std::strlen(entity);
        return text;
      }
    if (starts("&#")) {
      const bool hex = starts("&#x");
      pos_ += hex ? 3 : 2;
      const size_t begin = pos_;
      uint32_t cp = 0;
      for (; !at_end() && (hex ? std::isxdigit(static_cast<unsigned char>(s_[pos_]))
                               : std::isdigit(static_cast<unsigned char>(s_[pos_])));
           ++pos_)
        cp = std::min<uint32_t>(cp * (hex ? 16 : 10) + uint32_t(std::stoi(s_.substr(pos_, 1), nullptr, 16)), 0x110000);
      if (pos_ == begin || at_end() || s_[pos_] != ';') fail("a malformed numeric character reference");
      if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("a reference to an invalid character");
      ++pos_;
      return utf8(cp);
    }
    fail("'&' that does not start &lt; &gt; &amp; &quot; &apos; or a numeric reference");
  }

  // At '<': an element and everything inside it, kept on an explicit stack (deep documents cannot overflow).
  void element() {
    ++pos_;
    if (!start_tag()) return;
    std::vector<std::string> open = {elements_.back().name};
    do {
      if (starts("</")) {
        pos_ += 2;
        const std::string closing = name();
        if (open.empty() || closing != open.back())
          fail("</" + closing + "> closes " + (open.empty() ? std::string("nothing") : "<" + open.back() + ">"));
        open.pop_back();
        skip_space();
        expect(">");
      } else if (starts("<!--"))
        comment();
      else if (starts("<![CDATA["))
        skip_past("]]>", "an unterminated CDATA section");
      else if (starts("<!") || starts("<?"))
        fail("markup other than an element, a comment or CDATA inside an element");
      else if (s_[pos_] == '<') {
        ++pos_;
        if (start_tag()) open.push_back(elements_.back().name);
      } else if (s_[pos_] == '&')
        reference();
      else if (s_[pos_] == '>' && pos_ >= 2 && s_.compare(pos_ - 2, 2, "]]") == 0)
        fail("']]>' in text");
      else
        ++pos_;
      if (!open.empty() && at_end()) fail("<" + open.back() + "> is never closed");
    } while (!open.empty());
  }

  // After '<': the name and attributes up to '>' (returns true: content follows) or '/>' (false).
  bool start_tag() {
    XmlElement e;
    e.name = name();
    for (;;) {
      const size_t before = pos_;
      skip_space();
      if (starts("/>") || starts(">")) {
        const bool has_content = s_[pos_] == '>';
        pos_ += has_content ? 1 : 2;
        elements_.push_back(std::move(e));
        return has_content;
      }
      if (pos_ == before) fail("expected white space before an attribute of <" + e.name + ">");
      std::string key = name();
      for (const auto& [k, v] : e.attributes)
        if (k == key) fail("attribute '" + key + "' repeated in <" + e.name + ">");
      skip_space();
      expect("=");
      skip_space();
      if (at_end() || (s_[pos_] != '"' && s_[pos_] != '\'')) fail("the value of '" + key + "' is not quoted");
      const char quote = s_[pos_++];
      std::string value;
      while (!at_end() && s_[pos_] != quote) {
        if (s_[pos_] == '<') fail("'<' in the value of '" + key + "'");
        if (s_[pos_] == '&')
          value += reference();
        else
          value += s_[pos_++];
      }
      if (at_end()) fail("the value of '" + key + "' is never closed");
      ++pos_;
      e.attributes.emplace_back(std::move(key), std::move(value));
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::vector<XmlElement> elements_;
};

}  // namespace

std::string XmlElement::attribute(const std::string& key) const {
  for (const auto& [k, v] : attributes)
    if (k == key) return v;
  return "";
}

std::vector<XmlElement> XmlCheck::find(const std::string& name, const std::string& key,
                                       const std::string& value) const {
  std::vector<XmlElement> found;
  for (const XmlElement& e : elements)
    if (e.name == name && (key.empty() || e.attribute(key) == value)) found.push_back(e);
  return found;
}

XmlCheck check_xml(const std::string& text) { return XmlParser(text).run(); }

}  // namespace uoe::test
