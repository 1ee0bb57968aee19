// FlagValues (base/flag_values.h): how the libraries read their flags: a
// whole number in a range, one of two words, a default when not given.
#include "base/flag_values.h"

#include <string>

#include "gtest/gtest.h"

namespace pvdisk {
namespace {

FlagValues Given(std::map<std::string, std::string, std::less<>> values) {
  return FlagValues(std::move(values));
}

std::string ErrorOf(const absl::Status& status) {
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  return std::string(status.message());
}

TEST(FlagValuesTest, ANumberNotGivenIsTheDefault) {
  EXPECT_EQ(*Given({}).Number("queues", 2, 1, 64), 2u);
  EXPECT_FALSE(Given({}).Has("queues"));
}

TEST(FlagValuesTest, ANumberIsTakenWithinItsRangeAndItsEndsIncluded) {
  EXPECT_EQ(*Given({{"queues", "1"}}).Number("queues", 2, 1, 64), 1u);
  EXPECT_EQ(*Given({{"queues", "64"}}).Number("queues", 2, 1, 64), 64u);
  EXPECT_TRUE(Given({{"queues", "64"}}).Has("queues"));
}

TEST(FlagValuesTest, ANumberOutsideItsRangeOrNotANumberIsRefusedAsGiven) {
  EXPECT_EQ(
      ErrorOf(Given({{"queues", "65"}}).Number("queues", 2, 1, 64).status()),
      "--queues '65' is not allowed: use a whole number from 1 to 64");
  EXPECT_EQ(
      ErrorOf(Given({{"queues", "0"}}).Number("queues", 2, 1, 64).status()),
      "--queues '0' is not allowed: use a whole number from 1 to 64");
  EXPECT_EQ(ErrorOf(Given({{"poll-us", "-1"}})
                        .Number("poll-us", 50, 0, 1000000)
                        .status()),
            "--poll-us '-1' is not allowed: use a whole number from 0 to "
            "1000000");
  EXPECT_EQ(
      ErrorOf(Given({{"queues", "abc"}}).Number("queues", 2, 1, 64).status()),
      "--queues 'abc' is not allowed: use a whole number from 1 to 64");
}

TEST(FlagValuesTest, OneOfTwoWordsIsTheFirstOrTheSecondAndNothingElse) {
  EXPECT_TRUE(*Given({}).OneOf("merge", "on", "off"));
  EXPECT_TRUE(*Given({{"merge", "on"}}).OneOf("merge", "on", "off"));
  EXPECT_FALSE(*Given({{"merge", "off"}}).OneOf("merge", "on", "off"));
  EXPECT_EQ(
      ErrorOf(Given({{"merge", "maybe"}}).OneOf("merge", "on", "off").status()),
      "--merge 'maybe' is not allowed: use on or off");
}

TEST(FlagValuesTest, GetGivesTheValueOrTheDefault) {
  EXPECT_EQ(Given({{"irq", "thread"}}).Get("irq", "inline"), "thread");
  EXPECT_EQ(Given({}).Get("irq", "inline"), "inline");
}

}  // namespace
}  // namespace pvdisk
