// The small JSON reader that `pvdisk stat`, `pvdisk list` and the
// stats.json checks rely on.
#include "stats/json_reader.h"

#include <string>

#include "gtest/gtest.h"

namespace pvdisk::stats {
namespace {

TEST(JsonReaderTest, ReadsNestedValuesInOrder) {
  std::string error;
  std::optional<JsonValue> root = ParseJson(
      R"( {"disks": [{"name": "a\"b\u0041", "n": 18446744073709551615,
           "f": -1.5e3, "t": true, "no": false, "z": null, "e": {}, "l": []}]} )",
      &error);
  ASSERT_TRUE(root.has_value()) << error;
  const JsonValue* disks = root->Find("disks");
  ASSERT_NE(disks, nullptr);
  ASSERT_EQ(disks->array.size(), 1u);
  const JsonValue& disk = disks->array[0];
  ASSERT_EQ(disk.object.size(), 8u);
  EXPECT_EQ(disk.object[0].first, "name");
  EXPECT_EQ(disk.Find("name")->string, "a\"bA");
  EXPECT_TRUE(disk.Find("n")->is_unsigned);
  EXPECT_EQ(disk.Find("n")->unsigned_value, 18446744073709551615u);
  EXPECT_FALSE(disk.Find("f")->is_unsigned);
  EXPECT_EQ(disk.Find("f")->number, -1500.0);
  EXPECT_TRUE(disk.Find("t")->boolean);
  EXPECT_EQ(disk.Find("no")->type, JsonValue::Type::kBool);
  EXPECT_FALSE(disk.Find("no")->boolean);
  EXPECT_EQ(disk.Find("z")->type, JsonValue::Type::kNull);
  EXPECT_EQ(disk.Find("e")->type, JsonValue::Type::kObject);
  EXPECT_EQ(disk.Find("l")->type, JsonValue::Type::kArray);
  EXPECT_EQ(disk.Find("missing"), nullptr);
}

TEST(JsonReaderTest, RefusesBrokenDocuments) {
  for (const char* text :
       {"", "{", "{\"a\": }", "{\"a\": 1,}", "[1 2]", "{\"a\": 1} x", "{a: 1}",
        "\"unterminated", "{\"a\": tru}", "\"bad \\q escape\"", "\"\\u12\"",
        "{\"a\": 0123x}"}) {
    std::string error;
    EXPECT_FALSE(ParseJson(text, &error).has_value()) << text;
    EXPECT_FALSE(error.empty()) << text;
  }
}

}  // namespace
}  // namespace pvdisk::stats
