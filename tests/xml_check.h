// A small strict XML well-formedness checker for tests of generated SVG and (XHTML-style) HTML.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace uoe::test {

struct XmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;  // in document order, entities decoded
  std::string attribute(const std::string& key) const;          // "" when absent
};

struct XmlCheck {
  std::string error;                 // empty when the document is well-formed, else "line L: what is wrong"
  std::vector<XmlElement> elements;  // every start or empty-element tag, in document order
  // The elements named `name`, optionally only those whose attribute `key` equals `value`.
  std::vector<XmlElement> find(const std::string& name, const std::string& key = "",
                               const std::string& value = "") const;
};

// Checks that: there is one root element; tags are balanced and properly nested; attribute values are quoted
// ('...' or "...") with no '<' inside and no attribute repeated in a tag; '&' starts only &lt; &gt; &amp; &quot;
// &apos; or a numeric reference (&#10; &#x1F;); every character is valid UTF-8 and allowed by XML 1.0 (no
// control character but tab, LF and CR, no U+FFFE or U+FFFF). Allowed around and between elements: comments, a
// <!DOCTYPE ...>, a leading <?xml ...?> declaration, and CDATA sections inside elements. Names are not checked
// against a schema.
XmlCheck check_xml(const std::string& text);

}  // namespace uoe::test
