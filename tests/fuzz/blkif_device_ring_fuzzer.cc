// Fuzzes BlkifDeviceRing, the backend's side of a blkif ring, driven by a
// hostile frontend. The input (layout in make_seeds.py) is a configuration
// followed by a script: frontend actions (write request slots, publish or
// forge req_prod, move the event indices, write indirect segment pages, race
// the device's reads) interleaved with what BackendLoop does (take a request
// and answer invalid ones at once, answer taken ones in any order, publish,
// final check). After each step the ring must keep its contract:
// - kValid requests obey CheckValidRequest (pages, sectors, disk end, ro);
// - indirect requests only where more than 11 segments were negotiated;
// - the device never holds more unanswered requests than the ring has slots
//   (else a response would overwrite a request not yet read);
// - published rsp_prod is the number of responses put;
// - kNone agrees with HasRequests(); every page mapping is undone.
#include <cerrno>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "fuzz_input.h"
#include "hostile_grants.h"
#include "request_check.h"
#include "transport/blkif/device_ring.h"
#include "transport/blkif/format.h"
#include "transport/shared_index.h"

namespace pvdisk::fuzz {
namespace {

namespace blkif = transport::blkif;
using transport::DeviceRequest;
using transport::RingIdx;
using transport::TakeResult;

enum Action : uint8_t {
  kPushSlot,          // 112 bytes into the next slot; req_prod + 1
  kWriteSlot,         // u8 slot, 112 bytes; nothing published
  kSetReqProd,        // u32: forge req_prod
  kAddReqProd,        // i8: move req_prod by a little
  kSetEvents,         // u32 req_event, u32 rsp_event
  kWriteData,         // u8 page, u16 offset, u8 length, bytes
  kFillIndirectPage,  // u8 page, u16 count, u8 first data page: valid segments
  kRaceNextMap,       // u32 ring offset, u8 value
  kTake,              // TakeRequest, as BackendLoop::TakeRequests does
  kRespond,           // u8 which outstanding, u8 result
  kPublish,
  kFinalCheck,
  kActionCount,
};

int ResultFor(uint8_t code) {
  switch (code % 3) {
    case 0:
      return 0;
    case 1:
      return -EIO;
    default:
      return -EOPNOTSUPP;
  }
}

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
                            : transport::NotifyMode::kEventIdx) {}

  void Run() {
    while (!in_.empty()) Step(static_cast<Action>(in_.U8() % kActionCount));
    // Answer everything, as BackendLoop::Stop does.
    while (!outstanding_.empty()) Respond(0, 0);
    Publish();
    device_.FinalCheckForRequests();
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

  void Step(Action action) {
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
      case kRaceNextMap: {
        uint32_t offset = in_.U32();
        grants_.ArmRace(offset, in_.U8());
        break;
      }
      case kTake:
        Take();
        break;
      case kRespond: {
        uint8_t which = in_.U8();
        Respond(which, in_.U8());
        break;
      }
      case kPublish:
        Publish();
        break;
      case kFinalCheck:
        device_.FinalCheckForRequests();
        FUZZ_CHECK(grants_.Balanced(), "a mapping left behind");
        break;
      case kActionCount:
        break;
    }
  }

  void Take() {
    // BackendLoop takes only while it has a free slot for a valid request,
    // and stops taking from a broken ring.
    if (broken_ || outstanding_.size() >= slots_) return;
    DeviceRequest request;
    TakeResult result = device_.TakeRequest(&request);
    FUZZ_CHECK(grants_.Balanced(), "a mapping left behind");
    switch (result) {
      case TakeResult::kNone:
        FUZZ_CHECK(!device_.HasRequests(),
                   "kNone, yet HasRequests() says a request waits");
        return;
      case TakeResult::kRingBroken:
        broken_ = true;
        return;
      case TakeResult::kAnswered:
        FUZZ_CHECK(false, "blkif answered a request by itself");
        return;
      case TakeResult::kInvalid:
      case TakeResult::kUnsupported:
        ++taken_;
        CheckRoom();
        Put(request, result == TakeResult::kInvalid ? -EINVAL : -EOPNOTSUPP);
        return;
      case TakeResult::kValid:
        ++taken_;
        CheckRoom();
        CheckValidRequest(request, limits_);
        if (request.indirect) {
          FUZZ_CHECK(limits_.max_segments >
                         static_cast<uint32_t>(blkif::kMaxDirectSegments),
                     "an indirect request that was not negotiated");
        } else {
          FUZZ_CHECK(request.segments.size() <=
                         static_cast<size_t>(blkif::kMaxDirectSegments),
                     "a direct request with more than 11 segments");
        }
        outstanding_.push_back(std::move(request));
        return;
    }
  }

  // Requests taken and not answered must fit in the ring's slots, or a
  // response would land on a request the device has not read yet.
  void CheckRoom() {
    FUZZ_CHECK(static_cast<RingIdx>(taken_ - responded_) <= slots_,
               "more requests taken than the ring has room to answer");
  }

  void Respond(uint8_t which, uint8_t code) {
    if (outstanding_.empty()) return;
    auto it =
        outstanding_.begin() + static_cast<long>(which % outstanding_.size());
    Put(*it, ResultFor(code));
    outstanding_.erase(it);
  }

  void Put(const DeviceRequest& request, int result) {
    device_.PutResponse(request, result);
    ++responded_;
    FUZZ_CHECK(grants_.Balanced(), "a mapping left behind");
  }

  void Publish() {
    RingIdx before = transport::LoadAcquire(header()->rsp_prod);
    transport::PushResult pushed = device_.PublishResponses();
    RingIdx after = transport::LoadAcquire(header()->rsp_prod);
    FUZZ_CHECK(after == responded_, "rsp_prod is not the responses put");
    FUZZ_CHECK((pushed == transport::PushResult::kNothing) == (before == after),
               "PublishResponses() misreported what it published");
  }

  FuzzInput& in_;
  uint32_t slots_;
  std::vector<uint8_t> ring_;
  transport::DeviceLimits limits_;
  std::span<uint8_t> data_;  // the frontend's data pages
  HostileGrants grants_;
  transport::BlkifDeviceRing device_;

  RingIdx req_prod_ = 0;  // the frontend's private producer index
  bool broken_ = false;
  RingIdx taken_ = 0;      // requests the device handed out
  RingIdx responded_ = 0;  // responses put
  std::deque<DeviceRequest> outstanding_;
};

}  // namespace
}  // namespace pvdisk::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pvdisk::fuzz::FuzzInput in(data, size);
  pvdisk::fuzz::Harness harness(in);
  harness.Run();
  return 0;
}
