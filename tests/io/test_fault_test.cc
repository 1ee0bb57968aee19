// PVDISK_TEST_FAULT's grammar (io/test_fault.h): hang=SECTOR, fail=N,
// fanout and lying-flush, separated by commas; anything else is one message
// naming the variable, what is wrong and the forms allowed.
#include "io/test_fault.h"

#include <string>

#include "gtest/gtest.h"

namespace pvdisk::io {
namespace {

TEST(ParseTestFaultTest, TakesHangAndFailAloneOrTogether) {
  absl::StatusOr<TestFault> hang = ParseTestFault("hang=2048");
  ASSERT_TRUE(hang.ok()) << hang.status();
  EXPECT_EQ(hang->hang_sector, 2048u);
  EXPECT_FALSE(hang->fail_at.has_value());

  absl::StatusOr<TestFault> fail = ParseTestFault("fail=300");
  ASSERT_TRUE(fail.ok()) << fail.status();
  EXPECT_EQ(fail->fail_at, 300u);
  EXPECT_FALSE(fail->hang_sector.has_value());

  absl::StatusOr<TestFault> both = ParseTestFault("fail=1,hang=0");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->fail_at, 1u);
  EXPECT_EQ(both->hang_sector, 0u);
  EXPECT_FALSE(both->fanout);

  absl::StatusOr<TestFault> fanout = ParseTestFault("fanout,fail=2");
  ASSERT_TRUE(fanout.ok()) << fanout.status();
  EXPECT_TRUE(fanout->fanout);
  EXPECT_EQ(fanout->fail_at, 2u);
  EXPECT_FALSE(fanout->lying_flush);

  absl::StatusOr<TestFault> lying = ParseTestFault("lying-flush,fanout");
  ASSERT_TRUE(lying.ok()) << lying.status();
  EXPECT_TRUE(lying->lying_flush);
  EXPECT_TRUE(lying->fanout);
}

TEST(ParseTestFaultTest, RefusesWhatIsNotAFault) {
  for (const char* text :
       {"", "hang=", "hang=x", "hang=-1", "fail=0", "fail=", "fail=x",
        "hang=1,hang=2", "fail=1,fail=2", "engine_fail=3", "fail=1,", "HANG=1",
        "fanout=1", "fanout,fanout", "lying-flush,lying-flush",
        "lying_flush"}) {
    absl::StatusOr<TestFault> fault = ParseTestFault(text);
    ASSERT_FALSE(fault.ok()) << text;
    EXPECT_TRUE(absl::IsInvalidArgument(fault.status())) << text;
    const std::string message(fault.status().message());
    EXPECT_NE(message.find(std::string("PVDISK_TEST_FAULT='") + text + "'"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("use hang=SECTOR, fail=N (N from 1), fanout and/or "
                           "lying-flush"),
              std::string::npos)
        << message;
  }
  EXPECT_NE(std::string(ParseTestFault("fail=0").status().message())
                .find("fail takes one count of submissions from 1"),
            std::string::npos);
  EXPECT_NE(std::string(ParseTestFault("slow=3").status().message())
                .find("unknown fault 'slow=3'"),
            std::string::npos);
}

}  // namespace
}  // namespace pvdisk::io
