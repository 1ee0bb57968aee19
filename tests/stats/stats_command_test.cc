// ParseStatsCommand: what a write(2) to the stats file may say.
#include "stats/stats_command.h"

#include <string>

#include "gtest/gtest.h"

namespace pvdisk::stats {
namespace {

TEST(StatsCommandTest, AcceptsResetWithSurroundingWhitespace) {
  for (const char* text : {"reset", "reset\n", "  reset\t\n", "\nreset"}) {
    absl::StatusOr<StatsCommand> command = ParseStatsCommand(text);
    ASSERT_TRUE(command.ok()) << text << ": " << command.status();
    EXPECT_EQ(*command, StatsCommand::kReset);
  }
}

TEST(StatsCommandTest, RefusesAnythingElseNamingItAndTheAllowedCommand) {
  for (const char* text :
       {"", "\n", "Reset", "reset now", "re set", "resetx"}) {
    absl::StatusOr<StatsCommand> command = ParseStatsCommand(text);
    ASSERT_FALSE(command.ok()) << "'" << text << "' was accepted";
    EXPECT_EQ(command.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(command.status().message().find("allowed: reset"),
              std::string::npos)
        << command.status();
  }
}

TEST(StatsCommandTest, AcceptsPowercutWithItsArguments) {
  absl::StatusOr<StatsRequest> request =
      ParseStatsRequest("powercut disk0.img keep=random seed=42\n");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->command, StatsCommand::kPowerCut);
  EXPECT_EQ(request->disk, "disk0.img");
  EXPECT_EQ(request->keep, "random");
  EXPECT_EQ(request->seed, 42u);
  request = ParseStatsRequest("powercut d.img");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->keep, "none");
}

TEST(StatsCommandTest, RefusesABadPowercutNamingTheForm) {
  for (const char* text :
       {"powercut", "powercut keep=all", "powercut d keep=some",
        "powercut d seed=x", "powercut d keep=all keep=none", "powercut a/b",
        "powercut d extra"}) {
    absl::StatusOr<StatsRequest> request = ParseStatsRequest(text);
    ASSERT_FALSE(request.ok()) << "'" << text << "' was accepted";
    EXPECT_NE(request.status().message().find(
                  "powercut DISK [keep=none|all|random] [seed=N]"),
              std::string::npos)
        << request.status();
  }
}

TEST(StatsCommandTest, AcceptsAMarkWithOrWithoutItsDisk) {
  absl::StatusOr<StatsRequest> request = ParseStatsRequest("mark first\n");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->command, StatsCommand::kMark);
  EXPECT_EQ(request->disk, "");
  EXPECT_EQ(request->mark, "first");
  request = ParseStatsRequest("mark disk0.img second");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->disk, "disk0.img");
  EXPECT_EQ(request->mark, "second");
}

TEST(StatsCommandTest, RefusesABadMarkNamingTheForm) {
  for (const char* text : {"mark", "mark a b c", "mark a/b name"}) {
    absl::StatusOr<StatsRequest> request = ParseStatsRequest(text);
    ASSERT_FALSE(request.ok()) << "'" << text << "' was accepted";
    EXPECT_NE(request.status().message().find("mark [DISK] NAME"),
              std::string::npos)
        << request.status();
  }
}

TEST(StatsCommandTest, QuotesBinaryInputEscapedAndShortened) {
  std::string junk(1000, '\x01');
  junk[0] = '\0';
  absl::StatusOr<StatsCommand> command = ParseStatsCommand(junk);
  ASSERT_FALSE(command.ok());
  std::string message(command.status().message());
  EXPECT_LT(message.size(), 400u) << message;
  EXPECT_EQ(message.find('\x01'), std::string::npos) << "not escaped";
  EXPECT_NE(message.find("\\000\\001"), std::string::npos) << message;
  EXPECT_NE(message.find("..."), std::string::npos) << message;
}

}  // namespace
}  // namespace pvdisk::stats
