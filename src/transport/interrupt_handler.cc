#include "transport/interrupt_handler.h"

#include "absl/strings/str_cat.h"

namespace pvdisk::transport {

absl::StatusOr<InterruptMode> ParseInterruptMode(std::string_view text) {
  if (text == "inline") return InterruptMode::kInline;
  if (text == "thread") return InterruptMode::kThread;
  return absl::InvalidArgumentError(
      absl::StrCat("--irq '", absl::string_view(text.data(), text.size()),
                   "' is not allowed: use inline or thread"));
}

std::string_view InterruptModeName(InterruptMode mode) {
  return mode == InterruptMode::kInline ? "inline" : "thread";
}

}  // namespace pvdisk::transport
