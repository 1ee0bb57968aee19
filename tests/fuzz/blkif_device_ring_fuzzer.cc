// Fuzzes BlkifDeviceRing, the backend's side of a blkif ring, driven by a
// hostile frontend. The input (layout in make_seeds.py) is a configuration
// followed by a script: frontend actions (write request slots, publish or
// forge req_prod, move the event indices, write indirect segment pages, race
// the device's reads) interleaved with what BackendLoop does (take a request
// and answer invalid ones at once, answer taken ones in any order, publish,
// final check: BackendSide). After each step the ring must keep its
// contract:
// - kValid requests obey CheckValidRequest (pages, sectors, disk end, ro);
// - indirect requests only where more than 11 segments were negotiated;
// - the device never holds more unanswered requests than the ring has slots
//   (else a response would overwrite a request not yet read);
// - published rsp_prod is the number of responses put;
// - every request taken carries the id of its slot;
// - kNone agrees with HasRequests(); every page mapping is undone.
#include <cstdint>
#include <span>
#include <vector>

#include "backend_side.h"
#include "fuzz_input.h"
#include "hostile_grants.h"
#include "transport/blkif/device_ring.h"
#include "transport/blkif/format.h"
#include "transport/shared_index.h"

namespace pvdisk::fuzz {
namespace {

namespace blkif = transport::blkif;
using transport::DeviceRequest;
using transport::RingIdx;

// The frontend's actions; the backend's (BackendAction) follow them.
enum FrontendAction : uint8_t {
  kPushSlot,          // 112 bytes into the next slot; req_prod + 1
  kWriteSlot,         // u8 slot, 112 bytes; nothing published
  kSetReqProd,        // u32: forge req_prod
  kAddReqProd,        // i8: move req_prod by a little
  kSetEvents,         // u32 req_event, u32 rsp_event
  kWriteData,         // u8 page, u16 offset, u8 length, bytes
  kFillIndirectPage,  // u8 page, u16 count, u8 first data page: valid segments
  kFrontendActionCount,
};

class Harness {
 public:
  Harness(FuzzInput& in)
      : in_(in),
        slots_(1u << (in.U8() % 7)),
        ring_(blkif::RingBytes(slots_)),
        limits_(ReadLimits(in)),
        data_(FreshDataArea(limits_.data_pages)),
        grants_(data_.data(), limits_.data_pages,
                ring_.data() + sizeof(blkif::SharedRingHeader),
                size_t{slots_} * sizeof(blkif::Slot)),
        device_(InitRing(), slots_, &grants_, limits_,
                in.U8() & 1 ? transport::NotifyMode::kAlways
                            : transport::NotifyMode::kEventIdx),
        backend_(&device_, &grants_, limits_, slots_, Traits()) {}

  void Run() {
    backend_.RunScript(in_, kFrontendActionCount, [this](int action) {
      Step(static_cast<FrontendAction>(action));
    });
  }

 private:
  static transport::DeviceLimits ReadLimits(FuzzInput& in) {
    transport::DeviceLimits limits;
    limits.data_pages = 1 + in.U8() % 32;
    limits.disk_sectors = in.U64();
    limits.max_segments = 1 + in.U16() % blkif::kMaxIndirectSegments;
    limits.read_only = in.U8() & 1;
    return limits;
  }

  // The frontend's initialisation of the shared header (BlkifDriverRing).
  uint8_t* InitRing() {
    header()->req_event = 1;
    header()->rsp_event = 1;
    return ring_.data();
  }

  blkif::SharedRingHeader* header() {
    return reinterpret_cast<blkif::SharedRingHeader*>(ring_.data());
  }
  blkif::Slot* slot(RingIdx index) {
    return reinterpret_cast<blkif::Slot*>(ring_.data() +
                                          sizeof(blkif::SharedRingHeader)) +
           (index & (slots_ - 1));
  }

  void Step(FrontendAction action) {
    switch (action) {
      case kPushSlot:
        in_.Bytes(slot(req_prod_), sizeof(blkif::Slot));
        transport::StoreRelease(header()->req_prod, ++req_prod_);
        break;
      case kWriteSlot: {
        uint8_t index = in_.U8();
        in_.Bytes(slot(index), sizeof(blkif::Slot));
        break;
      }
      case kSetReqProd:
        req_prod_ = in_.U32();
        transport::StoreRelease(header()->req_prod, req_prod_);
        break;
      case kAddReqProd:
        req_prod_ += static_cast<RingIdx>(static_cast<int8_t>(in_.U8()));
        transport::StoreRelease(header()->req_prod, req_prod_);
        break;
      case kSetEvents:
        transport::StoreRelease(header()->req_event, in_.U32());
        transport::StoreRelease(header()->rsp_event, in_.U32());
        break;
      case kWriteData: {
        uint32_t page = in_.U8() % limits_.data_pages;
        uint32_t offset = in_.U16() % kPageBytes;
        uint32_t length = in_.U8();
        if (length > kPageBytes - offset) length = kPageBytes - offset;
        in_.Bytes(&data_[page * kPageBytes + offset], length);
        break;
      }
      case kFillIndirectPage: {
        // A page of well-formed segments, so that long indirect requests are
        // one step away instead of thousands of written bytes.
        uint32_t page = in_.U8() % limits_.data_pages;
        uint32_t count = in_.U16() % (blkif::kSegmentsPerIndirectPage + 1);
        uint32_t first = in_.U8();
        auto* segments =
            reinterpret_cast<blkif::Segment*>(&data_[page * kPageBytes]);
        for (uint32_t i = 0; i < count; ++i) {
          segments[i] =
              blkif::Segment{(first + i) % limits_.data_pages, 0, 7, 0};
        }
        break;
      }
      case kFrontendActionCount:
        break;
    }
  }

  RingTraits Traits() {
    RingTraits traits;
    traits.published = [this] {
      return transport::LoadAcquire(header()->rsp_prod);
    };
    traits.next_id = [this](uint32_t taken) { return slot(taken)->req.id; };
    traits.check_valid = [this](const DeviceRequest& request) {
      if (request.indirect) {
        FUZZ_CHECK(limits_.max_segments >
                       static_cast<uint32_t>(blkif::kMaxDirectSegments),
                   "an indirect request that was not negotiated");
      } else {
        FUZZ_CHECK(request.segments.size() <=
                       static_cast<size_t>(blkif::kMaxDirectSegments),
                   "a direct request with more than 11 segments");
      }
    };
    traits.bounds_unanswered = true;
    return traits;
  }

  FuzzInput& in_;
  uint32_t slots_;
  std::vector<uint8_t> ring_;
  transport::DeviceLimits limits_;
  std::span<uint8_t> data_;  // the frontend's data pages
  HostileGrants grants_;
  transport::BlkifDeviceRing device_;

  BackendSide backend_;
  RingIdx req_prod_ = 0;  // the frontend's private producer index
};

}  // namespace
}  // namespace pvdisk::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pvdisk::fuzz::FuzzInput in(data, size);
  pvdisk::fuzz::Harness harness(in);
  harness.Run();
  return 0;
}
