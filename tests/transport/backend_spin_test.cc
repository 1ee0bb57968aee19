// BackendShouldSpin: whether a backend thread spins before it sleeps, each
// input's part in the decision.
#include "transport/backend_spin.h"

#include <gtest/gtest.h>

namespace pvdisk::transport {
namespace {

// A backend that would spin: polling on, requests one at a time, free to
// run anywhere, one I/O in flight that can complete while it spins.
BackendSpinInputs Spinning() {
  BackendSpinInputs in;
  in.poll_us = 50;
  in.one_at_a_time = true;
  in.on_kicker_cpu = false;
  in.inflight = 1;
  in.completes_while_spinning = true;
  return in;
}

TEST(BackendSpinTest, SpinsForALoneCompletionThatCanCome) {
  EXPECT_TRUE(BackendShouldSpin(Spinning()));
}

TEST(BackendSpinTest, NeverWithoutPollUs) {
  BackendSpinInputs in = Spinning();
  in.poll_us = 0;
  EXPECT_FALSE(BackendShouldSpin(in));
  in.inflight = 0;
  EXPECT_FALSE(BackendShouldSpin(in));
}

TEST(BackendSpinTest, NeverAtDepth) {
  BackendSpinInputs in = Spinning();
  in.one_at_a_time = false;
  EXPECT_FALSE(BackendShouldSpin(in));
  in.inflight = 0;
  EXPECT_FALSE(BackendShouldSpin(in));
}

// An rbd request (or a uring flush) in flight: the engine says spinning
// cannot see it come, so the thread sleeps at once, wherever it runs.
TEST(BackendSpinTest, AsksTheEngineAboutWhatIsInFlight) {
  BackendSpinInputs in = Spinning();
  in.completes_while_spinning = false;
  EXPECT_FALSE(BackendShouldSpin(in));
  in.on_kicker_cpu = true;
  EXPECT_FALSE(BackendShouldSpin(in));
}

// With nothing in flight the spin waits for the next request only; the
// engine's answer concerns what it holds, so it does not count.
TEST(BackendSpinTest, WithNothingInFlightSpinsForTheNextRequestElsewhere) {
  BackendSpinInputs in = Spinning();
  in.inflight = 0;
  EXPECT_TRUE(BackendShouldSpin(in));
  in.completes_while_spinning = false;
  EXPECT_TRUE(BackendShouldSpin(in));
}

// On the kicker's CPU the next request's sender needs the CPU: a spin only
// for a completion on its way.
TEST(BackendSpinTest, OnTheKickersCpuOnlyForACompletionOnItsWay) {
  BackendSpinInputs in = Spinning();
  in.on_kicker_cpu = true;
  EXPECT_TRUE(BackendShouldSpin(in));
  in.inflight = 0;
  EXPECT_FALSE(BackendShouldSpin(in));
}

}  // namespace
}  // namespace pvdisk::transport
