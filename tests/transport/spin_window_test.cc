// SpinWindow: how long a spin lasts, from the lone I/Os it has timed and
// --poll-us.
#include "transport/spin_window.h"

#include <gtest/gtest.h>

namespace pvdisk::transport {
namespace {

constexpr uint64_t kUs = 1000;

TEST(SpinWindowTest, PollUsUntilALoneIoWasTimed) {
  // Measured: at delay=500 and iodepth 2 on a fresh mount no I/O is ever
  // alone, and a first window of the whole cap kept the backend thread
  // spinning (2.4 s of CPU in 3 s; 0.8 s with this rule, 1.0 s with the
  // fixed 50 us spin before).
  SpinWindow window;
  EXPECT_EQ(window.average_ns(), -1);
  EXPECT_EQ(window.ForCompletionUs(kDefaultPollUs), kDefaultPollUs);
  EXPECT_EQ(window.ForCompletionUs(5000), 5000u);
  // --poll-us 0: no spin.
  EXPECT_EQ(window.ForCompletionUs(0), 0u);
}

TEST(SpinWindowTest, HalfAgainTheAverageAndAStepOfSlack) {
  SpinWindow window;
  window.Record(60 * kUs);  // the first sample starts the average
  EXPECT_EQ(window.average_ns(), 60'000);
  // 60 + 30 + 2 us of slack, whether --poll-us is below that or not.
  EXPECT_EQ(window.ForCompletionUs(kDefaultPollUs), 92u);
  EXPECT_EQ(window.ForCompletionUs(1000), 92u);
}

TEST(SpinWindowTest, NeverBeyondTheCap) {
  SpinWindow window;
  window.Record(150 * kUs);  // 150 * 1.5 > kCompletionSpinCapUs
  EXPECT_EQ(window.ForCompletionUs(kDefaultPollUs), kCompletionSpinCapUs);
  // Under a longer --poll-us the window is the device's.
  EXPECT_EQ(window.ForCompletionUs(1000), 227u);
}

TEST(SpinWindowTest, NoSpinForCompletionsSlowerThanTheCap) {
  SpinWindow window;
  window.Record(2000 * kUs);  // a delay model of 2 ms
  EXPECT_EQ(window.ForCompletionUs(kDefaultPollUs), 0u);
  // Unless --poll-us asks for spins that long.
  EXPECT_EQ(window.ForCompletionUs(5000), 3002u);
  EXPECT_EQ(window.ForCompletionUs(0), 0u);
}

TEST(SpinWindowTest, FollowsTheDeviceOneEighthPerSample) {
  SpinWindow window;
  window.Record(40 * kUs);
  window.Record(120 * kUs);  // 40 + (120 - 40) / 8
  EXPECT_EQ(window.average_ns(), 50'000);
  // A device that became slow moves the window over a few dozen I/Os, and
  // past the cap the spin stops.
  for (int i = 0; i < 64; ++i) window.Record(1000 * kUs);
  EXPECT_GT(window.average_ns(), 900'000);
  EXPECT_EQ(window.ForCompletionUs(kDefaultPollUs), 0u);
  // And back, once it is fast again.
  for (int i = 0; i < 64; ++i) window.Record(50 * kUs);
  EXPECT_LT(window.average_ns(), 60'000);
  EXPECT_GT(window.ForCompletionUs(kDefaultPollUs), 75u);
}

TEST(SpinWindowTest, AStalledDeviceIsClippedSoTheAverageComesBack) {
  SpinWindow window;
  window.Record(60 * kUs);
  window.Record(uint64_t{3600} * 1000 * 1000 * 1000);  // an hour
  EXPECT_LE(window.average_ns(), 60'000 + 10'000'000'000 / 8);
  for (int i = 0; i < 200; ++i) window.Record(60 * kUs);
  EXPECT_EQ(window.ForCompletionUs(kDefaultPollUs), 92u);
}

TEST(SpinWindowTest, TheNextRequestsSpinIsPollUs) {
  EXPECT_EQ(SpinWindow::ForNextRequestUs(kDefaultPollUs), 50u);
  EXPECT_EQ(SpinWindow::ForNextRequestUs(2'000'000), 2'000'000u);
  EXPECT_EQ(SpinWindow::ForNextRequestUs(0), 0u);
}

}  // namespace
}  // namespace pvdisk::transport
