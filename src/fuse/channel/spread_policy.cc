#include "fuse/channel/spread_policy.h"

namespace pvdisk::fuse::channel {

uint32_t SpreadTarget(const SpreadState& state, uint32_t* turn) {
  const uint32_t n = state.queues;
  if (n < 2) return kKeep;
  if (state.holder == state.owner) {
    // At depth every other reply goes out through another queue thread, in
    // turn. Where the balance settles: this thread keeps handing entries
    // away while it holds two or more requests weighing kSpreadDepth units
    // or more (first measured at one fio job of 4 KiB writes at depth 32 on
    // 2 CPUs: both threads equally busy).
    if (state.with_handler < 2 || state.held_units < kSpreadDepth) {
      return kKeep;
    }
    const uint32_t at = (*turn)++;
    if (at % 2 == 0) return kKeep;
    return (state.holder + 1 + (at / 2) % (n - 1)) % n;
  }
  // A lone request on another queue's entry: the entry goes home.
  if (state.with_handler <= 1) return state.owner;
  return kKeep;
}

}  // namespace pvdisk::fuse::channel
