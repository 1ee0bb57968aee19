// ReadPlacementFlags (cli/placement_flags.h): --placement and --max-memory
// as DecidePlacement gets them.
#include "cli/placement_flags.h"

#include <string>

#include "gtest/gtest.h"
#include "transport/memory_budget.h"

namespace pvdisk::cli {
namespace {

FlagValues Given(std::map<std::string, std::string, std::less<>> values) {
  return FlagValues(std::move(values));
}

TEST(PlacementFlagsTest, NoFlagsAreAutoWithAQuarterOfRam) {
  PlacementInput input;
  ASSERT_TRUE(ReadPlacementFlags(Given({}), &input).ok());
  EXPECT_EQ(input.wanted, PlacementFlag::kAuto);
  EXPECT_EQ(input.memory_budget, transport::DefaultMemoryBudget());
}

TEST(PlacementFlagsTest, ThePlacementAndTheBudgetAreTakenAsGiven) {
  PlacementInput input;
  ASSERT_TRUE(ReadPlacementFlags(Given({{"placement", "backend-thread"},
                                        {"max-memory", "2G"}}),
                                 &input)
                  .ok());
  EXPECT_EQ(input.wanted, PlacementFlag::kBackendThread);
  EXPECT_EQ(input.memory_budget, uint64_t{2} << 30);
}

TEST(PlacementFlagsTest, AnUnknownPlacementOrSizeIsRefused) {
  PlacementInput input;
  absl::Status placement =
      ReadPlacementFlags(Given({{"placement", "nearby"}}), &input);
  EXPECT_TRUE(absl::IsInvalidArgument(placement));
  EXPECT_NE(std::string(placement.message()).find("--placement"),
            std::string::npos)
      << placement;
  absl::Status size =
      ReadPlacementFlags(Given({{"max-memory", "lots"}}), &input);
  EXPECT_TRUE(absl::IsInvalidArgument(size));
  EXPECT_EQ(std::string(size.message()).rfind("--max-memory: ", 0), 0u) << size;
}

}  // namespace
}  // namespace pvdisk::cli
