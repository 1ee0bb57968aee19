// Fuzzes VirtioDeviceRing, the device side of a split virtqueue, driven by a
// hostile driver. The input (layout in make_seeds.py) is a configuration
// followed by a script: driver actions (write descriptors, publish heads or
// forge avail.idx, set used_event and the avail flags, write headers,
// indirect tables and discard segments into the data area, race the
// device's reads) interleaved with what BackendLoop does (take a request and
// answer invalid ones at once, answer taken ones in any order, publish,
// final check). After each step the ring must keep its contract:
// - kValid requests obey CheckValidRequest (pages, sectors, disk end, ro);
// - the device touches data pages only inside the data area, through
//   mappings it undoes (HostileGrants), and no shared byte outside the ring
//   (AddressSanitizer: the ring is allocated at its exact size);
// - used.idx is published as the number of responses put, and every used
//   element's id is a 16-bit head;
// - kNone agrees with HasRequests().
#include <cerrno>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "hostile_grants.h"
#include "request_check.h"
#include "transport/shared_index.h"
#include "transport/virtio/device_ring.h"
#include "transport/virtio/format.h"
#include "transport/virtio/queue_view.h"

namespace pvdisk::fuzz {
namespace {

namespace virtio = transport::virtio;
using transport::DeviceRequest;
using transport::TakeResult;

enum Action : uint8_t {
  kWriteDesc,       // u16 index, 16 bytes
  kPushHead,        // u16 head: avail.ring[idx] = head; avail.idx + 1
  kSetAvailIdx,     // u16: forge avail.idx
  kSetDriverWords,  // u16 avail.flags, u16 used_event
  kWriteData,       // u32 offset, u8 length, bytes
  kRaceNextMap,     // u32 ring offset, u8 value
  kTake,            // TakeRequest, as BackendLoop::TakeRequests does
  kRespond,         // u8 which outstanding, u8 result
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

std::string ReadSerial(FuzzInput& in) {
  std::string serial(in.U8() % 32, '\0');
  in.Bytes(serial.data(), serial.size());
  return serial;
}

class Harness {
 public:
  Harness(FuzzInput& in)
      : in_(in),
        size_(1u << (in.U8() % 9)),
        ring_(virtio::LayoutFor(size_).bytes),
        limits_(ReadLimits(in)),
        data_(FreshDataArea(limits_.data_pages)),
        grants_(data_.data(), limits_.data_pages, ring_.data(),
                virtio::LayoutFor(size_).used),  // descriptors, avail ring
        q_(ring_.data(), size_),
        device_(ring_.data(), size_, &grants_, limits_,
                in.U8() & 1 ? transport::NotifyMode::kAlways
                            : transport::NotifyMode::kEventIdx) {}

  void Run() {
    while (!in_.empty()) Step(static_cast<Action>(in_.U8() % kActionCount));
    while (!outstanding_.empty()) Respond(0, 0);
    Publish();
    device_.FinalCheckForRequests();
  }

 private:
  static transport::DeviceLimits ReadLimits(FuzzInput& in) {
    transport::DeviceLimits limits;
    limits.data_pages = 1 + in.U8() % 64;
    limits.disk_sectors = in.U64();
    limits.max_segments = 1 + in.U16() % 4096;
    limits.read_only = in.U8() & 1;
    limits.serial = ReadSerial(in);
    return limits;
  }

  void Step(Action action) {
    switch (action) {
      case kWriteDesc: {
        uint32_t index = in_.U16() % size_;
        in_.Bytes(&q_.DescTable()[index], sizeof(virtio::Desc));
        break;
      }
      case kPushHead: {
        uint16_t head = in_.U16();
        transport::StoreRelaxed(q_.AvailRing(avail_idx_ & (size_ - 1)), head);
        transport::StoreRelease(q_.AvailIdx(), ++avail_idx_);
        break;
      }
      case kSetAvailIdx:
        avail_idx_ = in_.U16();
        transport::StoreRelease(q_.AvailIdx(), avail_idx_);
        break;
      case kSetDriverWords:
        transport::StoreRelease(q_.AvailFlags(), in_.U16());
        transport::StoreRelease(q_.UsedEvent(), in_.U16());
        break;
      case kWriteData: {
        uint64_t offset = in_.U32() % data_.size();
        size_t length = in_.U8();
        if (length > data_.size() - offset) length = data_.size() - offset;
        in_.Bytes(&data_[offset], length);
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
    if (broken_ || outstanding_.size() >= size_) return;
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
        ++responded_;  // GET_ID: the ring put the response itself
        return;
      case TakeResult::kInvalid:
      case TakeResult::kUnsupported:
        Put(request, result == TakeResult::kInvalid ? -EINVAL : -EOPNOTSUPP);
        return;
      case TakeResult::kValid:
        CheckValidRequest(request, limits_);
        outstanding_.push_back(std::move(request));
        return;
    }
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
    uint16_t before = transport::LoadAcquire(q_.UsedIdx());
    transport::PushResult pushed = device_.PublishResponses();
    uint16_t after = transport::LoadAcquire(q_.UsedIdx());
    FUZZ_CHECK(after == responded_, "used.idx is not the responses put");
    FUZZ_CHECK((pushed == transport::PushResult::kNothing) == (before == after),
               "PublishResponses() misreported what it published");
    for (uint16_t i = before; i != after; ++i) {
      uint32_t id = q_.UsedRing(i & (size_ - 1)).id;
      FUZZ_CHECK(id <= UINT16_MAX,
                 "a used element whose id is no avail ring entry");
    }
  }

  FuzzInput& in_;
  uint32_t size_;
  std::vector<uint8_t> ring_;
  transport::DeviceLimits limits_;
  std::span<uint8_t> data_;  // the frontend's data pages
  HostileGrants grants_;
  virtio::QueueView q_;  // the driver's view of the same memory
  transport::VirtioDeviceRing device_;

  uint16_t avail_idx_ = 0;  // the driver's private avail.idx
  bool broken_ = false;
  uint16_t responded_ = 0;  // responses put, modulo 2^16 like used.idx
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
