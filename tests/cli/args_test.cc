#include "cli/args.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace pvdisk::cli {
namespace {

const std::vector<FlagSpec>& Specs() {
  static const auto* specs = new std::vector<FlagSpec>{
      {"disk", true, true, "IMAGE", "", "an image to serve"},
      {"ring-size", true, false, "N", "256", "ring slots"},
      {"engine", true, false, "NAME", "uring", "I/O engine"},
      {"force", false, false, "", "", "overwrite"},
  };
  return *specs;
}

absl::StatusOr<ParsedArgs> Parse(const std::vector<std::string>& args) {
  return ParseArgs("mount", Specs(), args);
}

std::string ErrorOf(const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = Parse(args);
  EXPECT_FALSE(parsed.ok());
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(parsed.status().message());
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ParseArgsTest, NothingGiven) {
  absl::StatusOr<ParsedArgs> parsed = Parse({});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->positional.empty());
  EXPECT_TRUE(parsed->values.empty());
  EXPECT_FALSE(parsed->Has("disk"));
  EXPECT_EQ(parsed->Get("ring-size", "256"), "256");
}

TEST(ParseArgsTest, ValueSeparateOrAfterEquals) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--ring-size", "64"}, {"--ring-size=64"}}) {
    absl::StatusOr<ParsedArgs> parsed = Parse(args);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_TRUE(parsed->Has("ring-size"));
    EXPECT_EQ(parsed->Get("ring-size", "256"), "64");
    EXPECT_EQ(parsed->values.at("ring-size"), std::vector<std::string>{"64"});
    EXPECT_TRUE(parsed->positional.empty());
  }
}

TEST(ParseArgsTest, ValueAfterEqualsMayContainEqualsOrBeEmpty) {
  absl::StatusOr<ParsedArgs> parsed = Parse({"--disk=a=b.img,ro", "--engine="});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Get("disk", ""), "a=b.img,ro");
  EXPECT_TRUE(parsed->Has("engine"));
  EXPECT_EQ(parsed->values.at("engine"), std::vector<std::string>{""});
}

TEST(ParseArgsTest, UnknownFlagNamesItAndTheAllowedOnes) {
  std::string message = ErrorOf({"mnt", "--ring-sise", "64"});
  EXPECT_TRUE(Contains(message, "'--ring-sise'")) << message;
  EXPECT_TRUE(Contains(message, "pvdisk mount")) << message;
  for (const char* flag : {"--disk", "--ring-size", "--engine", "--force"}) {
    EXPECT_TRUE(Contains(message, flag)) << flag << " missing: " << message;
  }

  // The inline value is not part of the flag's name.
  message = ErrorOf({"--bogus=3"});
  EXPECT_TRUE(Contains(message, "'--bogus'")) << message;
  EXPECT_FALSE(Contains(message, "=3")) << message;

  message = ErrorOf({"-f"});
  EXPECT_TRUE(Contains(message, "'-f'")) << message;
  EXPECT_TRUE(Contains(message, "--force")) << message;
}

TEST(ParseArgsTest, UnknownFlagWithNoFlagsDeclared) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs("unmount", {}, {"--lazy"});
  ASSERT_FALSE(parsed.ok());
  std::string message(parsed.status().message());
  EXPECT_TRUE(Contains(message, "'--lazy'")) << message;
  EXPECT_TRUE(Contains(message, "pvdisk unmount")) << message;
  EXPECT_TRUE(Contains(message, "none")) << message;
}

TEST(ParseArgsTest, MissingValue) {
  std::string message = ErrorOf({"mnt", "--ring-size"});
  EXPECT_TRUE(Contains(message, "--ring-size")) << message;
  EXPECT_TRUE(Contains(message, "needs a value")) << message;
  EXPECT_TRUE(Contains(message, "N")) << message;
}

TEST(ParseArgsTest, RepeatableFlagAccumulatesInOrder) {
  absl::StatusOr<ParsedArgs> parsed =
      Parse({"--disk", "a.img", "mnt", "--disk=b.img,ro", "--disk", "c.img"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->values.at("disk"),
            (std::vector<std::string>{"a.img", "b.img,ro", "c.img"}));
  EXPECT_EQ(parsed->Get("disk", ""), "c.img");
  EXPECT_EQ(parsed->positional, std::vector<std::string>{"mnt"});
}

TEST(ParseArgsTest, NonRepeatableFlagTwiceIsAnError) {
  std::string message = ErrorOf({"--ring-size", "64", "--ring-size=128"});
  EXPECT_TRUE(Contains(message, "--ring-size")) << message;
  EXPECT_TRUE(Contains(message, "more than once")) << message;
  message = ErrorOf({"--force", "--force"});
  EXPECT_TRUE(Contains(message, "--force")) << message;
}

TEST(ParseArgsTest, Switches) {
  absl::StatusOr<ParsedArgs> parsed = Parse({"img", "--force"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->Has("force"));
  EXPECT_EQ(parsed->positional, std::vector<std::string>{"img"});
  // A switch does not swallow the next word.
  parsed = Parse({"--force", "img"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->Has("force"));
  EXPECT_EQ(parsed->positional, std::vector<std::string>{"img"});

  std::string message = ErrorOf({"--force=yes"});
  EXPECT_TRUE(Contains(message, "--force")) << message;
  EXPECT_TRUE(Contains(message, "takes no value")) << message;
}

TEST(ParseArgsTest, PositionalCollectedInOrder) {
  absl::StatusOr<ParsedArgs> parsed =
      Parse({"first", "--engine", "sync", "second", "-", "third"});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->positional,
            (std::vector<std::string>{"first", "second", "-", "third"}));
  EXPECT_EQ(parsed->Get("engine", "uring"), "sync");
}

TEST(FlagHelpTest, ListsFlagsWithValuesDefaultsAndRepeatable) {
  std::string help = FlagHelp(Specs());
  EXPECT_TRUE(Contains(help, "--disk IMAGE")) << help;
  EXPECT_TRUE(Contains(help, "--ring-size N")) << help;
  EXPECT_TRUE(Contains(help, "(default: 256)")) << help;
  EXPECT_TRUE(Contains(help, "(default: uring)")) << help;
  EXPECT_TRUE(Contains(help, "[repeatable]")) << help;
  EXPECT_TRUE(Contains(help, "--force")) << help;
  EXPECT_TRUE(Contains(help, "overwrite")) << help;
  size_t lines = 0;
  for (char c : help) lines += c == '\n';
  EXPECT_EQ(lines, Specs().size());
}

TEST(ParseNumberTest, InRange) {
  EXPECT_EQ(ParseNumber("ring-size", "32", 32, 4096).value_or(0), 32u);
  EXPECT_EQ(ParseNumber("ring-size", "256", 32, 4096).value_or(0), 256u);
  EXPECT_EQ(ParseNumber("ring-size", "4096", 32, 4096).value_or(0), 4096u);
  EXPECT_EQ(ParseNumber("n", "18446744073709551615", 0, UINT64_MAX).value_or(0),
            UINT64_MAX);
}

TEST(ParseNumberTest, OutOfRangeOrNotANumber) {
  for (const char* text : {"31", "4097", "0", "", "abc", "-1", "1.5", "64k",
                           "99999999999999999999999"}) {
    absl::StatusOr<uint64_t> value = ParseNumber("ring-size", text, 32, 4096);
    ASSERT_FALSE(value.ok()) << text;
    EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
    std::string message(value.status().message());
    EXPECT_TRUE(Contains(message, "--ring-size")) << message;
    EXPECT_TRUE(Contains(message, std::string("'") + text + "'")) << message;
    EXPECT_TRUE(Contains(message, "32")) << message;
    EXPECT_TRUE(Contains(message, "4096")) << message;
  }
}

}  // namespace
}  // namespace pvdisk::cli
