// The test-side XML checker accepts well-formed documents and names what is wrong with malformed ones.
#include <gtest/gtest.h>

#include "xml_check.h"

namespace uoe::test {
namespace {

TEST(XmlCheck, AcceptsWellFormedDocumentsAndListsTheirElements) {
  const XmlCheck c = check_xml(
      "<?xml version=\"1.0\"?>\n<!DOCTYPE html>\n<!-- a comment -->\n"
      "<html lang='en'><body><figure id=\"a&amp;b\"><svg xmlns=\"x\"/></figure>"
      "<figure id=\"c&#233;&#x41;\">1 &lt; 2 <![CDATA[<raw & text>]]></figure><br/></body></html>\n<!-- end -->");
  ASSERT_EQ(c.error, "");
  ASSERT_EQ(c.elements.size(), 6u);
  EXPECT_EQ(c.elements[0].name, "html");
  EXPECT_EQ(c.elements[0].attribute("lang"), "en");
  EXPECT_EQ(c.find("figure").size(), 2u);
  EXPECT_EQ(c.find("figure", "id", "a&b").size(), 1u);
  EXPECT_EQ(c.find("figure", "id",
                   "c\xC3\xA9"
                   "A")
                .size(),
            1u);
  EXPECT_EQ(c.find("svg").size(), 1u);
  EXPECT_EQ(c.find("svg")[0].attribute("missing"), "");
}

TEST(XmlCheck, RejectsEachKindOfMalformedDocument) {
  const std::pair<const char*, const char*> cases[] = {
      {"<a><b></a></b>", "</a> closes <b>"},
      {"<a><b></b>", "never closed"},
      {"<a></b>", "</b> closes <a>"},
      {"<a x=1/>", "not quoted"},
      {"<a x=\"1\" x=\"2\"/>", "repeated"},
      {"<a x=\"1\"y=\"2\"/>", "white space before an attribute"},
      {"<a x=\"<\"/>", "'<' in the value"},
      {"<a>&nbsp;</a>", "'&' that does not start"},
      {"<a>&#xZZ;</a>", "numeric character reference"},
      {"<a>&#0;</a>", "invalid character"},
      {"<a/><b/>", "content after the root"},
      {"text<a/>", "text before the root"},
      {"<a>]]></a>", "']]>'"},
      {"<!-- x -- y --><a/>", "'--' inside a comment"},
      {"<a/><!DOCTYPE html>", "after the root"},
      {"<?php x ?><a/>", "processing instruction"},
      {"", "no root element"},
      {"<1a/>", "expected a name"},
      {"<a x=\"1/>", "never closed"},
  };
  for (const auto& [doc, expected] : cases) {
    const XmlCheck c = check_xml(doc);
    EXPECT_NE(c.error.find(expected), std::string::npos) << doc << " -> '" << c.error << "'";
  }
  EXPECT_EQ(check_xml("<a>\n<b>\n</a>").error.rfind("line 3:", 0), 0u) << check_xml("<a>\n<b>\n</a>").error;
}

}  // namespace
}  // namespace uoe::test
