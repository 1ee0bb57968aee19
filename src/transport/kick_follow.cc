#include "transport/kick_follow.h"

namespace pvdisk::transport {

bool KickFollow::Round(bool one_at_a_time, int kick_cpu) {
  if (!one_at_a_time) {
    candidate_ = kAnyCpu;
    streak_ = 0;
    if (cpu_ == kAnyCpu) return false;
    cpu_ = kAnyCpu;
    return true;
  }
  if (kick_cpu < 0) return false;
  if (kick_cpu == candidate_) {
    if (streak_ < kStreak) ++streak_;
  } else {
    candidate_ = kick_cpu;
    streak_ = 1;
  }
  if (streak_ < kStreak || cpu_ == candidate_) return false;
  cpu_ = candidate_;
  return true;
}

BackendAffinity::BackendAffinity() {
  CPU_ZERO(&allowed_);
  known_ = sched_getaffinity(0, sizeof(allowed_), &allowed_) == 0;
}

void BackendAffinity::Apply(int cpu) {
  if (!known_) return;
  if (cpu == KickFollow::kAnyCpu) {
    (void)sched_setaffinity(0, sizeof(allowed_), &allowed_);
    return;
  }
  if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed_)) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  (void)sched_setaffinity(0, sizeof(one), &one);
}

}  // namespace pvdisk::transport
