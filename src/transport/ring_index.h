// Free-running ring index arithmetic and the Xen notification rules.
//
// Indices are 32-bit counters that wrap modulo 2^32; a slot is index &
// (size - 1). Every difference below is computed in 32-bit unsigned
// arithmetic, so it stays right across the wrap.
#pragma once

#include <cstdint>

namespace pvdisk::transport {

using RingIdx = uint32_t;

// True when a producer that moved its index from `old_prod` to `new_prod`
// must notify a consumer that asked to be woken at `event` (the consumer's
// "next index that should notify"): iff event lies in (old_prod, new_prod].
// This is RING_PUSH_*_AND_CHECK_NOTIFY's test.
constexpr bool NeedsNotify(RingIdx old_prod, RingIdx new_prod, RingIdx event) {
  return static_cast<RingIdx>(new_prod - event) <
         static_cast<RingIdx>(new_prod - old_prod);
}

// Requests the back end may take now: those published and not consumed, but
// never more than it has free response slots for
// (RING_HAS_UNCONSUMED_REQUESTS).
constexpr RingIdx UnconsumedRequests(RingIdx req_prod, RingIdx req_cons,
                                     RingIdx rsp_prod_pvt, RingIdx size) {
  RingIdx published = req_prod - req_cons;
  RingIdx room = size - (req_cons - rsp_prod_pvt);
  return published < room ? published : room;
}

// An untrusted front end claims more requests than the ring can hold
// (RING_REQUEST_PROD_OVERFLOW).
constexpr bool RequestProducerOverflow(RingIdx req_prod, RingIdx rsp_prod_pvt,
                                       RingIdx size) {
  return static_cast<RingIdx>(req_prod - rsp_prod_pvt) > size;
}

// An untrusted back end claims more responses than requests outstanding
// (RING_RESPONSE_PROD_OVERFLOW).
constexpr bool ResponseProducerOverflow(RingIdx rsp_prod, RingIdx rsp_cons,
                                        RingIdx size) {
  return static_cast<RingIdx>(rsp_prod - rsp_cons) > size;
}

}  // namespace pvdisk::transport
