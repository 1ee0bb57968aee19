#include "stats/text_table.h"

#include "gtest/gtest.h"

namespace pvdisk::stats {
namespace {

TEST(TextTableTest, NamesLeftNumbersRightNoTrailingSpaces) {
  EXPECT_EQ(AlignColumns({{"disk", "queue", "r/s"},
                          {"a.img", "0", "1.50"},
                          {"b", "all", "12.00"}},
                         2, " "),
            "disk  queue   r/s\n"
            "a.img 0      1.50\n"
            "b     all   12.00\n");
  // The last name column padded would only add trailing spaces.
  EXPECT_EQ(AlignColumns({{"long name"}, {"x"}}, 1, "  "), "long name\nx\n");
  EXPECT_EQ(AlignColumns({}, 2, " "), "");
}

}  // namespace
}  // namespace pvdisk::stats
