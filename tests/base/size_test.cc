#include "base/size.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace pvdisk {
namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kTiB = uint64_t{1} << 40;

uint64_t ParseOk(const std::string& text) {
  absl::StatusOr<uint64_t> size = ParseSize(text);
  EXPECT_TRUE(size.ok()) << text << ": " << size.status();
  return size.ok() ? *size : 0;
}

TEST(ParseSizeTest, PlainBytes) {
  EXPECT_EQ(ParseOk("512"), 512u);
  EXPECT_EQ(ParseOk("1"), 1u);
  EXPECT_EQ(ParseOk("4096"), 4096u);
  EXPECT_EQ(ParseOk("007"), 7u);
}

TEST(ParseSizeTest, BinaryUnitsAnyCase) {
  EXPECT_EQ(ParseOk("4k"), 4 * kKiB);
  EXPECT_EQ(ParseOk("4K"), 4 * kKiB);
  EXPECT_EQ(ParseOk("256M"), 256 * kMiB);
  EXPECT_EQ(ParseOk("256m"), 256 * kMiB);
  EXPECT_EQ(ParseOk("1G"), kGiB);
  EXPECT_EQ(ParseOk("1g"), kGiB);
  EXPECT_EQ(ParseOk("2T"), 2 * kTiB);
  EXPECT_EQ(ParseOk("2t"), 2 * kTiB);
}

TEST(ParseSizeTest, UnitSuffixes) {
  EXPECT_EQ(ParseOk("1GiB"), kGiB);
  EXPECT_EQ(ParseOk("1Gib"), kGiB);
  EXPECT_EQ(ParseOk("1GB"), kGiB);
  EXPECT_EQ(ParseOk("1Gb"), kGiB);
  EXPECT_EQ(ParseOk("64KiB"), 64 * kKiB);
  EXPECT_EQ(ParseOk("3MB"), 3 * kMiB);
}

TEST(ParseSizeTest, BytesUnit) {
  EXPECT_EQ(ParseOk("1b"), 1u);
  EXPECT_EQ(ParseOk("1B"), 1u);
  EXPECT_EQ(ParseOk("4096B"), 4096u);
  EXPECT_FALSE(ParseSize("1BB").ok());
  EXPECT_FALSE(ParseSize("1BiB").ok());
}

TEST(ParseSizeTest, LargestValues) {
  EXPECT_EQ(ParseOk("18446744073709551615"),
            std::numeric_limits<uint64_t>::max());
  // 2^24 TiB is 2^64 and overflows; one less fits.
  EXPECT_EQ(ParseOk("16777215T"), uint64_t{16777215} << 40);
  EXPECT_EQ(ParseOk("17179869183G"), uint64_t{17179869183} << 30);
}

TEST(ParseSizeTest, RejectsMalformedText) {
  for (const char* text :
       {"", "abc", "0", "0K", "00", "12Q", "-1", "+1", "1.5G", " 1G", "1G ",
        "1 G", "K", "1KK", "1KiBB", "1Ki", "1iB", "1e3", "0x10"}) {
    absl::StatusOr<uint64_t> size = ParseSize(text);
    EXPECT_FALSE(size.ok()) << "'" << text << "' parsed as " << *size;
    if (!size.ok()) {
      EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument)
          << text;
    }
  }
}

TEST(ParseSizeTest, RejectsOverflow) {
  for (const char* text :
       {"18446744073709551616", "99999999999999999999",
        "999999999999999999999999999999", "20000000000T", "16777216T",
        "17179869184G", "17592186044416M", "18014398509481984K"}) {
    absl::StatusOr<uint64_t> size = ParseSize(text);
    EXPECT_FALSE(size.ok()) << "'" << text << "' parsed as " << *size;
  }
}

TEST(ParseSizeTest, ErrorNamesTextAndAllowedForms) {
  absl::StatusOr<uint64_t> size = ParseSize("12Q");
  ASSERT_FALSE(size.ok());
  std::string message(size.status().message());
  EXPECT_NE(message.find("'12Q'"), std::string::npos) << message;
  for (const char* form : {"K", "M", "G", "T", "256M", "1G"}) {
    EXPECT_NE(message.find(form), std::string::npos)
        << "missing " << form << " in: " << message;
  }

  absl::StatusOr<uint64_t> empty = ParseSize("");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(std::string(empty.status().message()).find("''"),
            std::string::npos);

  absl::StatusOr<uint64_t> overflow = ParseSize("20000000000T");
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(std::string(overflow.status().message()).find("20000000000T"),
            std::string::npos);
}

TEST(FormatSizeTest, LargestExactUnit) {
  EXPECT_EQ(FormatSize(0), "0 B");
  EXPECT_EQ(FormatSize(1), "1 B");
  EXPECT_EQ(FormatSize(1000), "1000 B");
  EXPECT_EQ(FormatSize(1023), "1023 B");
  EXPECT_EQ(FormatSize(kKiB), "1 KiB");
  EXPECT_EQ(FormatSize(4 * kKiB), "4 KiB");
  EXPECT_EQ(FormatSize(1536), "1536 B");
  EXPECT_EQ(FormatSize(1536 * kKiB), "1536 KiB");
  EXPECT_EQ(FormatSize(256 * kMiB), "256 MiB");
  EXPECT_EQ(FormatSize(kGiB), "1 GiB");
  EXPECT_EQ(FormatSize(3 * kTiB), "3 TiB");
  EXPECT_EQ(FormatSize(1024 * kTiB), "1024 TiB");
  EXPECT_EQ(FormatSize(kGiB + 512), "1073742336 B");
}

TEST(FormatSizeTest, RoundTripsThroughParseSize) {
  for (uint64_t bytes : {uint64_t{512}, 4 * kKiB, 256 * kMiB, 1536 * kKiB, kGiB,
                         2 * kTiB, uint64_t{1000}}) {
    std::string text = FormatSize(bytes);
    // "256 MiB" -> "256MiB": ParseSize takes no space.
    text.erase(text.find(' '), 1);
    EXPECT_EQ(ParseOk(text), bytes) << text;
  }
}

}  // namespace
}  // namespace pvdisk
