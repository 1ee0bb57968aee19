#include "fuse/channel/queue_affinity.h"

#include "absl/strings/str_cat.h"

namespace pvdisk::fuse::channel {

absl::StatusOr<QueuePin> ParseQueuePin(std::string_view text) {
  if (text == "auto") return QueuePin::kAuto;
  if (text == "on") return QueuePin::kOn;
  if (text == "off") return QueuePin::kOff;
  return absl::InvalidArgumentError(absl::StrCat(
      "--fuse-queue-pin '", absl::string_view(text.data(), text.size()),
      "' is not allowed: use auto, on or off"));
}

std::string_view QueuePinName(QueuePin pin) {
  switch (pin) {
    case QueuePin::kAuto:
      return "auto";
    case QueuePin::kOn:
      return "on";
    case QueuePin::kOff:
      return "off";
  }
  return "?";
}

bool AutoPin::Round(unsigned at_once) {
  if (at_once == 0) return false;
  if (at_once >= deep_at_) ++deep_rounds_;
  if (++rounds_ < kWindow) return false;
  const bool deep = deep_rounds_ >= kDeepRounds;
  rounds_ = 0;
  deep_rounds_ = 0;
  if (deep) {
    calm_windows_ = 0;
    if (!on_own_cpu_) return false;
    on_own_cpu_ = false;
    return true;
  }
  if (on_own_cpu_ || ++calm_windows_ < kCalmWindows) return false;
  calm_windows_ = 0;
  on_own_cpu_ = true;
  return true;
}

QueueAffinity::QueueAffinity(QueuePin pin, uint32_t cpu, unsigned deep_at)
    : pin_(pin), policy_(deep_at) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  CPU_ZERO(&own_);
  CPU_ZERO(&others_);
  if (pin_ == QueuePin::kOff ||
      sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    return;
  }
  others_ = allowed;
  if (cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed)) {
    CPU_SET(cpu, &own_);
    CPU_CLR(cpu, &others_);
  }
  Apply();  // on and auto both start on the queue's CPU
}

void QueueAffinity::Apply() {
  const cpu_set_t& wanted = policy_.on_own_cpu() ? own_ : others_;
  // A failure leaves the thread where it was: slower, never wrong (the
  // queue hint, not the CPU, keeps requests on their queue).
  if (CPU_COUNT(&wanted) > 0) {
    (void)sched_setaffinity(0, sizeof(wanted), &wanted);
  }
}

}  // namespace pvdisk::fuse::channel
