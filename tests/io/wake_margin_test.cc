// WakeMargin (io/wake_margin.h): the delay model's early wake-up follows
// the usual lateness of its sleeps, not the rare long one.
#include "io/wake_margin.h"

#include <gtest/gtest.h>

namespace pvdisk::io {
namespace {

constexpr int64_t kUs = WakeMargin::kNanosPerMicro;

TEST(WakeMarginTest, StartsAtTheInitialMargin) {
  WakeMargin margin;
  EXPECT_EQ(margin.margin_ns(), WakeMargin::kInitialNs);
  margin.Learn(-5 * kUs);  // woken early by something else: says nothing
  EXPECT_EQ(margin.margin_ns(), WakeMargin::kInitialNs);
}

TEST(WakeMarginTest, CoversTheUsualLatenessPlusSlack) {
  WakeMargin margin;
  for (unsigned i = 0; i < WakeMargin::kWindow; ++i) margin.Learn(60 * kUs);
  EXPECT_EQ(margin.margin_ns(), 60 * kUs + WakeMargin::kSlackNs);
}

TEST(WakeMarginTest, RareLongWakeUpsDoNotPushItToItsCap) {
  WakeMargin margin;
  // Per window of 64 sleeps, kSkipped of them milliseconds late (another
  // thread had the CPU), the rest 50-80 us.
  for (unsigned i = 0; i < 4 * WakeMargin::kWindow; ++i) {
    const bool outlier = i % WakeMargin::kWindow < WakeMargin::kSkipped;
    margin.Learn(outlier ? 3000 * kUs : (50 + i % 31) * kUs);
  }
  EXPECT_EQ(margin.margin_ns(), 80 * kUs + WakeMargin::kSlackNs);
}

TEST(WakeMarginTest, MostSleepsLateReachTheCapAndNoFurther) {
  WakeMargin margin;
  for (unsigned i = 0; i < WakeMargin::kWindow; ++i) margin.Learn(900 * kUs);
  EXPECT_EQ(margin.margin_ns(), WakeMargin::kMaxNs);
}

TEST(WakeMarginTest, ForgetsWhatLeftTheWindow) {
  WakeMargin margin;
  for (unsigned i = 0; i < WakeMargin::kWindow; ++i) margin.Learn(200 * kUs);
  EXPECT_EQ(margin.margin_ns(), 200 * kUs + WakeMargin::kSlackNs);
  // Punctual wake-ups once the machine is quiet: a window of them brings
  // the margin down to theirs.
  for (unsigned i = 0; i < WakeMargin::kWindow; ++i) margin.Learn(5 * kUs);
  EXPECT_EQ(margin.margin_ns(), 5 * kUs + WakeMargin::kSlackNs);
}

TEST(WakeMarginTest, AFewSamplesLeaveOutTheSameShare) {
  WakeMargin margin;
  // Ten samples: none left out (10 * 6 / 64 = 0): the worst of a few is
  // covered until there are enough to tell it is rare.
  for (int i = 1; i <= 10; ++i) margin.Learn(i * 10 * kUs);
  EXPECT_EQ(margin.margin_ns(), 100 * kUs + WakeMargin::kSlackNs);
  // Thirty-two: three left out, the 29th lowest covered.
  for (int i = 11; i <= 32; ++i) margin.Learn(i * kUs);
  // Held: 10..100 us (ten) and 11..32 us (22); the three latest are 100,
  // 90 and 80 us, the fourth 70 us.
  EXPECT_EQ(margin.margin_ns(), 70 * kUs + WakeMargin::kSlackNs);
}

}  // namespace
}  // namespace pvdisk::io
