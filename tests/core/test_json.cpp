// JSON: round trips, exact integers, bit-exact doubles, unicode, pretty printing, syntax errors with line:col, getters.
#include "core/json.h"

#include <gtest/gtest.h>

#include "gradcheck.h"
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "core/error.h"

namespace uoe::json {
namespace {

using uoe::testing::error_of;

TEST(Json, ParsesEveryKindAndRoundTrips) {
  const std::string text =
      R"({"null":null,"t":true,"f":false,"int":-42,"dbl":2.5,"exp":1e3,"str":"a\"b\\c","arr":[1,[2,[]],{}],)"
      R"("obj":{"z":1,"a":2}})";
  Value v = parse(text);
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v.size(), 9u);
  EXPECT_TRUE(v.at("null").is_null());
  EXPECT_TRUE(v.at("t").as_bool());
  EXPECT_FALSE(v.at("f").as_bool());
  EXPECT_EQ(v.at("int").as_int(), -42);
  EXPECT_TRUE(v.at("int").is_integer());
  EXPECT_EQ(v.at("dbl").as_double(), 2.5);
  EXPECT_FALSE(v.at("dbl").is_integer());
  EXPECT_EQ(v.at("exp").as_double(), 1000.0);
  EXPECT_FALSE(v.at("exp").is_integer());
  EXPECT_EQ(v.at("exp").as_int(), 1000);  // integral doubles convert
  EXPECT_EQ(v.at("str").as_string(), "a\"b\\c");
  EXPECT_EQ(v.at("arr").as_array().size(), 3u);
  EXPECT_EQ(v.at("arr").as_array()[1].as_array()[0].as_int(), 2);
  // Insertion order is kept in items() and in dump().
  EXPECT_EQ(v.at("obj").items()[0].first, "z");
  EXPECT_EQ(v.at("obj").items()[1].first, "a");
  const std::string compact = v.dump();
  EXPECT_EQ(compact,
            R"({"null":null,"t":true,"f":false,"int":-42,"dbl":2.5,"exp":1000.0,"str":"a\"b\\c","arr":[1,[2,[]],{}],)"
            R"("obj":{"z":1,"a":2}})");
  EXPECT_EQ(parse(compact), v);
  EXPECT_EQ(parse(v.dump(2)), v);
  EXPECT_EQ(parse(v.dump(0)), v);
  EXPECT_EQ(parse(" \t\r\n[ 1 , 2 ]\n "), parse("[1,2]"));
}

TEST(Json, BuildsValuesWithOperatorsAndPushBack) {
  Value v;
  v["name"] = "uoe";
  v["layers"] = 12;
  v["lr"] = 3e-4;
  v["flags"]["a"] = true;  // a null member becomes an object
  v["list"].push_back(1);  // a null member becomes an array
  v["list"].push_back("x");
  v["list"].push_back(nullptr);
  v["size"] = size_t(7);
  v["u32"] = 5u;
  v["ll"] = -3LL;
  EXPECT_EQ(v.dump(), R"({"name":"uoe","layers":12,"lr":0.0003,"flags":{"a":true},"list":[1,"x",null],"size":7,)"
                      R"("u32":5,"ll":-3})");
  v["layers"] = 24;  // overwrite keeps the position
  EXPECT_EQ(v.items()[1].first, "layers");
  EXPECT_EQ(v.at("layers").as_int(), 24);
  EXPECT_TRUE(v.contains("lr"));
  EXPECT_FALSE(v.contains("nope"));
  EXPECT_FALSE(Value(3).contains("x"));
  EXPECT_EQ(Value::array().dump(), "[]");
  EXPECT_EQ(Value::object().dump(2), "{}");
  EXPECT_EQ(Value().size(), 0u);
  EXPECT_THROW(Value(1).push_back(2), Error);
  EXPECT_THROW(Value("s")["k"], Error);
  EXPECT_THROW(Value(1).size(), Error);
}

TEST(Json, IntegersAreExact) {
  const int64_t mx = std::numeric_limits<int64_t>::max(), mn = std::numeric_limits<int64_t>::min();
  const uint64_t umx = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(Value(mx).dump(), "9223372036854775807");
  EXPECT_EQ(Value(mn).dump(), "-9223372036854775808");
  EXPECT_EQ(Value(umx).dump(), "18446744073709551615");
  EXPECT_EQ(parse("9223372036854775807").as_int(), mx);
  EXPECT_EQ(parse("-9223372036854775808").as_int(), mn);
  EXPECT_EQ(parse("18446744073709551615").as_uint(), umx);
  EXPECT_EQ(parse("9007199254740993").as_int(), 9007199254740993);  // 2^53 + 1: not a double
  EXPECT_EQ(parse("[9223372036854775807,-9223372036854775808,18446744073709551615]").dump(),
            "[9223372036854775807,-9223372036854775808,18446744073709551615]");
  EXPECT_EQ(parse("9223372036854775808").as_uint(), 9223372036854775808ull);
  EXPECT_TRUE(parse("9223372036854775808").is_integer());
  // Beyond uint64 (or below int64) an integer literal becomes a double.
  EXPECT_FALSE(parse("18446744073709551616").is_integer());
  EXPECT_EQ(parse("-9223372036854775809").as_double(), -9223372036854775808.0);
  // Range and integrality checks of the accessors.
  EXPECT_NE(error_of([] { parse("18446744073709551615").as_int(); }).find("int64"), std::string::npos);
  EXPECT_NE(error_of([] { parse("1.5").as_int(); }).find("1.5"), std::string::npos);
  EXPECT_THROW(parse("-1").as_uint(), Error);
  EXPECT_THROW(parse("1e30").as_int(), Error);
  EXPECT_EQ(Value(uint64_t(5)), Value(5));
  EXPECT_EQ(Value(1), Value(1.0));
  EXPECT_NE(Value(1), Value(1.5));
  EXPECT_NE(Value(1), Value("1"));
  EXPECT_NE(Value(mx), Value(9223372036854775808.0));
  EXPECT_EQ(Value(umx - 2047), Value(18446744073709549568.0));
}

TEST(Json, DoublesRoundTripBitExactly) {
  std::mt19937_64 rng(1234);
  int checked = 0;
  for (int i = 0; i < 20000; ++i) {
    double d = std::bit_cast<double>(rng());
    if (i % 2) d = std::ldexp(double(rng() >> 11), -int(rng() % 80));  // "ordinary" magnitudes too
    if (!std::isfinite(d)) continue;
    const std::string s = Value(d).dump();
    const Value back = parse(s);
    ASSERT_FALSE(back.is_integer()) << s;
    ASSERT_EQ(std::bit_cast<uint64_t>(back.as_double()), std::bit_cast<uint64_t>(d)) << s;
    ++checked;
  }
  EXPECT_GT(checked, 19000);
  const double specials[] = {0.0, -0.0, 0.1, 1.0 / 3, 1e-300, 5e-324, 2.2250738585072014e-308,
                             std::numeric_limits<double>::max(), -1.5e300, 1e21, 123456789.0};
  for (double d : specials)
    EXPECT_EQ(std::bit_cast<uint64_t>(parse(Value(d).dump()).as_double()), std::bit_cast<uint64_t>(d)) << d;
  EXPECT_EQ(Value(0.1).dump(), "0.1");  // shortest form, not 0.10000000000000001
  EXPECT_EQ(Value(1.0).dump(), "1.0");  // stays a double when read back
  EXPECT_EQ(Value(-0.0).dump(), "-0.0");
  EXPECT_EQ(Value(1e300).dump(), "1e+300");
  EXPECT_EQ(parse("1E2").as_double(), 100.0);
  EXPECT_EQ(parse("-2.5e-3").as_double(), -0.0025);
  EXPECT_EQ(parse("1e-400").as_double(), 0.0);  // underflow rounds to zero
  EXPECT_TRUE(std::signbit(parse("-1e-400").as_double()));
  // NaN and infinities have no JSON form.
  EXPECT_NE(error_of([] { Value(std::nan("")).dump(); }).find("NaN"), std::string::npos);
  EXPECT_THROW(Value(HUGE_VAL).dump(), Error);
  Value nested;
  nested["x"].push_back(-HUGE_VAL);
  EXPECT_THROW(nested.dump(), Error);
}

TEST(Json, UnicodeEscapesAndUtf8) {
  EXPECT_EQ(parse(R"("\u0041\u00e9\u20AC")").as_string(), "A\xC3\xA9\xE2\x82\xAC");  // A é €
  EXPECT_EQ(parse(R"("\ud83d\ude00")").as_string(), "\xF0\x9F\x98\x80");            // U+1F600 (surrogate pair)
  EXPECT_EQ(parse(R"("\uDBFF\uDFFF")").as_string(), "\xF4\x8F\xBF\xBF");            // U+10FFFF
  EXPECT_EQ(parse(R"("\u0000")").as_string(), std::string(1, '\0'));
  EXPECT_EQ(parse(R"("\/\b\f\n\r\t")").as_string(), "/\b\f\n\r\t");
  EXPECT_EQ(parse("\"caf\xC3\xA9 \xF0\x9F\x98\x80\"").as_string(), "caf\xC3\xA9 \xF0\x9F\x98\x80");  // raw UTF-8
  // Output: control characters escaped, UTF-8 written as is.
  EXPECT_EQ(Value(std::string("a\n\t\"\\\x01\x1f\xC3\xA9/")).dump(), R"("a\n\t\"\\\u0001\u001f)"
                                                                     "\xC3\xA9"
                                                                     R"(/")");
  EXPECT_EQ(Value(std::string(1, '\0')).dump(), R"("\u0000")");
  const std::string s = "\x7f \xE2\x82\xAC \xF0\x9F\x98\x80 \b";
  EXPECT_EQ(parse(Value(s).dump()).as_string(), s);
  EXPECT_NE(error_of([] { Value(std::string("\xff")).dump(); }).find("UTF-8"), std::string::npos);
  EXPECT_NE(error_of([] { parse(R"("\ude00")"); }).find("1:7: syntax error while parsing value - invalid string: "
                                                       "surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(R"("\ud83dx")"); }).find("1:8: syntax error while parsing value - invalid string: "
                                                        "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse(R"("\ud83d\u0041")"); }).find("1:13: syntax error while parsing value - invalid "
                                                             "string: surrogate U+D800..U+DBFF must be followed by"),
            std::string::npos);
}

TEST(Json, PrettyPrinting) {
  Value v = parse(R"({"a":1,"b":[true,null,"x"],"c":{},"d":[],"e":{"f":[1.5]}})");
  EXPECT_EQ(v.dump(2),
            "{\n"
            "  \"a\": 1,\n"
            "  \"b\": [\n"
            "    true,\n"
            "    null,\n"
            "    \"x\"\n"
            "  ],\n"
            "  \"c\": {},\n"
            "  \"d\": [],\n"
            "  \"e\": {\n"
            "    \"f\": [\n"
            "      1.5\n"
            "    ]\n"
            "  }\n"
            "}");
  EXPECT_EQ(parse("[1,2]").dump(4), "[\n    1,\n    2\n]");
  EXPECT_EQ(parse("[1,2]").dump(0), "[\n1,\n2\n]");
  EXPECT_EQ(Value("s").dump(2), "\"s\"");
}

TEST(Json, SyntaxErrorsGiveLineAndColumn) {
  struct Case {
    std::string text, expected;
  };
  // The position is the character that went wrong (or, at the end, one past the last); the text is nlohmann-json's:
  // what it was parsing, what it found and what it expected.
  const std::string value = "syntax error while parsing value - ";
  const std::string a_value = "; expected '[', '{', or a literal";
  const std::vector<Case> cases = {
      {"", "[json] json:1:1: " + value + "unexpected end of input" + a_value},
      {"   ", "json:1:4: " + value + "unexpected end of input" + a_value},
      {"@", "json:1:1: " + value + "invalid literal; last read: '@'"},
      {"{\"a\":1,}", "json:1:8: syntax error while parsing object key - unexpected '}'; expected string literal"},
      {"{1:2}", "json:1:2: syntax error while parsing object key - unexpected number literal; expected string literal"},
      {"{\"a\" 1}", "json:1:6: syntax error while parsing object separator - unexpected number literal; expected ':'"},
      {"{\"a\":1 \"b\":2}", "json:1:10: syntax error while parsing object - unexpected string literal; expected '}'"},
      {"{\"a\":1", "json:1:7: syntax error while parsing object - unexpected end of input; expected '}'"},
      {"{\"a\":1,\"a\":2}", "json:1:10: duplicate key \"a\" in object"},  // at the key's closing quote
      {"{\"o\":{\"b\":1,\"b\":2}}", "json:1:15: duplicate key \"b\" in object"},
      {"[1,2", "json:1:5: syntax error while parsing array - unexpected end of input; expected ']'"},
      {"[1,]", "json:1:4: " + value + "unexpected ']'" + a_value},
      {"[1 2]", "json:1:4: syntax error while parsing array - unexpected number literal; expected ']'"},
      {"tru", "json:1:4: " + value + "invalid literal; last read: 'tru'"},
      {"nul1", "json:1:4: " + value + "invalid literal; last read: 'nul1'"},
      {"falsy", "json:1:5: " + value + "invalid literal; last read: 'falsy'"},
      {"NaN", "json:1:1: " + value + "invalid literal; last read: 'N'"},
      {"01", "json:1:2: " + value + "unexpected number literal; expected end of input"},
      {"-", "json:1:2: " + value + "invalid number; expected digit after '-'"},
      {"-a", "json:1:2: " + value + "invalid number; expected digit after '-'; last read: '-a'"},
      {"1.", "json:1:3: " + value + "invalid number; expected digit after '.'"},
      {".5", "json:1:1: " + value + "invalid literal; last read: '.'"},
      {"1e", "json:1:3: " + value + "invalid number; expected '+', '-', or digit after exponent"},
      {"1e+", "json:1:4: " + value + "invalid number; expected digit after exponent sign"},
      {"+1", "json:1:1: " + value + "invalid literal"},
      {"1e400", "json:1:5: number overflow parsing '1e400'"},
      {"\"abc", "json:1:5: " + value + "invalid string: missing closing quote; last read: '\"abc'"},
      {"\"a\\x\"", "json:1:4: " + value + "invalid string: forbidden character after backslash"},
      {"\"\\u12G4\"", "json:1:6: " + value + "invalid string: '\\u' must be followed by 4 hex digits"},
      {"\"a\nb\"", "json:1:3: " + value + "invalid string: control character U+000A (LF) must be escaped"},
      {"\"\xff\"", "json:1:2: " + value + "invalid string: ill-formed UTF-8 byte; last read: '\"<0xff>'"},
      {"\"\xC0\xAF\"", "json:1:2: " + value + "invalid string: ill-formed UTF-8 byte"},      // overlong '/'
      {"\"\xED\xA0\x80\"", "json:1:3: " + value + "invalid string: ill-formed UTF-8 byte"},  // encoded surrogate
      {"[1] x", "json:1:5: " + value + "invalid literal; last read: '1] x'; expected end of input"},
      {"{} {}", "json:1:4: " + value + "unexpected '{'; expected end of input"},
      {"[\n  1,\n  2\n  }", "json:4:3: syntax error while parsing array - unexpected '}'; expected ']'"},
      {"{\n\"a\": [1,\n\"b\" 2]}", "json:3:5: syntax error while parsing array - unexpected number literal"},
      {"\t\r\n\n   x", "json:3:4: " + value + "invalid literal"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of([&] { parse(c.text); });
    EXPECT_NE(msg.find(c.expected), std::string::npos) << "input: " << c.text << "\nmessage: " << msg;
  }
  // The source name appears in the message.
  EXPECT_EQ(error_of([] { parse("[", "configs/tiny.json"); }),
            "[json] configs/tiny.json:1:2: syntax error while parsing value - unexpected end of input; expected '[', "
            "'{', or a literal");
  // A long token is quoted only in part.
  const std::string unclosed = error_of([] { parse("\"" + std::string(100000, 'x')); });
  EXPECT_NE(unclosed.find("json:1:100002: syntax error while parsing value - invalid string: missing closing quote"),
            std::string::npos);
  EXPECT_LT(unclosed.size(), 250u);
  EXPECT_EQ(unclosed.substr(unclosed.size() - 3), "...");
}

TEST(Json, NestingDepthIsLimited) {
  EXPECT_NO_THROW(parse(std::string(512, '[') + std::string(512, ']')));
  const std::string deep = std::string(513, '[') + std::string(513, ']');
  EXPECT_NE(error_of([&] { parse(deep); }).find("json:1:513: expected at most 512 levels"), std::string::npos);
  std::string objs;
  for (int i = 0; i < 100000; ++i) objs += "{\"a\":";  // far too deep: an error, not a stack overflow
  EXPECT_NE(error_of([&] { parse(objs); }).find("json:1:2561: expected at most 512 levels"), std::string::npos);
  const std::string arrays = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of([&] { parse(arrays); }).find("json:1:513: expected at most 512 levels"), std::string::npos);
}

TEST(Json, TypedGettersWithDefaults) {
  const Value cfg = parse(R"({"lr":0.01,"steps":100,"big":1e3,"name":"tiny","bf16":true,"none":null,"frac":2.5})");
  EXPECT_EQ(cfg.get("lr", 1e-3), 0.01);
  EXPECT_EQ(cfg.get("missing", 1e-3), 1e-3);
  EXPECT_EQ(cfg.get("steps", 1.0), 100.0);  // integers read as doubles
  EXPECT_EQ(cfg.get("steps", int64_t(5)), 100);
  EXPECT_EQ(cfg.get("steps", 5), 100);       // int default picks the integer getter
  EXPECT_EQ(cfg.get("big", 5), 1000);        // an integral double is an integer
  EXPECT_EQ(cfg.get("missing", 7), 7);
  EXPECT_EQ(cfg.get("name", "x"), "tiny");  // const char* default picks the string getter
  EXPECT_EQ(cfg.get("missing", std::string("x")), "x");
  EXPECT_EQ(cfg.get("bf16", false), true);
  EXPECT_EQ(cfg.get("missing", true), true);
  EXPECT_EQ(cfg.get("none", 3), 3);  // null counts as missing
  EXPECT_EQ(Value().get("lr", 0.5), 0.5);  // so does a null document
  // Wrong types: the error names the key and the expected type.
  EXPECT_EQ(error_of([&] { cfg.get("name", 1.0); }), "[json] key \"name\": expected a number, got string \"tiny\"");
  EXPECT_EQ(error_of([&] { cfg.get("frac", 1); }), "[json] key \"frac\": expected an integer in the int64 range, got 2.5");
  EXPECT_EQ(error_of([&] { cfg.get("lr", false); }),
            "[json] key \"lr\": expected a bool (true or false), got number 0.01");
  EXPECT_EQ(error_of([&] { cfg.get("bf16", "x"); }), "[json] key \"bf16\": expected a string, got bool true");
  EXPECT_NE(error_of([] { parse("[1]").get("lr", 1.0); }).find("key \"lr\" from a array"), std::string::npos);
  // Plain accessors.
  EXPECT_EQ(error_of([&] { cfg.at("epochs"); }).find("[json] missing key \"epochs\""), 0u);
  EXPECT_NE(error_of([&] { cfg.at("epochs"); }).find("lr, steps"), std::string::npos);
  EXPECT_EQ(error_of([&] { cfg.at("name").as_int(); }), "[json] expected an integer, got string \"tiny\"");
  EXPECT_EQ(error_of([&] { cfg.at("lr").as_string(); }), "[json] expected a string, got number 0.01");
  EXPECT_THROW(cfg.at("lr").as_bool(), Error);
  EXPECT_THROW(cfg.at("lr").as_array(), Error);
  EXPECT_THROW(cfg.at("lr").items(), Error);
  EXPECT_THROW(Value(1).at("x"), Error);
}

TEST(Json, ReadFileNamesThePath) {
  const std::string dir = ::testing::TempDir() + "uoe_json_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string good = dir + "/good.json", bad = dir + "/bad.json";
  std::ofstream(good) << "{\"a\": [1, 2]}\n";
  std::ofstream(bad) << "{\n  \"a\": [1, 2\n}\n";
  EXPECT_EQ(read_file(good).at("a").size(), 2u);
  EXPECT_NE(error_of([&] { read_file(bad); }).find(bad + ":3:1: syntax error while parsing array - unexpected '}'"),
            std::string::npos);
  const std::string missing = dir + "/missing.json";
  EXPECT_NE(error_of([&] { read_file(missing); }).find(missing), std::string::npos);
  EXPECT_NE(error_of([&] { read_file(dir); }).find("directory"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace uoe::json
