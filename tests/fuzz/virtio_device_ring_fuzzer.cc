// Fuzzes VirtioDeviceRing, the device side of a split virtqueue, driven by a
// hostile driver. The input (layout in make_seeds.py) is a configuration
// followed by a script: driver actions (write descriptors, publish heads or
// forge avail.idx, set used_event and the avail flags, write headers,
// indirect tables and discard segments into the data area, race the
// device's reads) interleaved with what BackendLoop does (take a request and
// answer invalid ones at once, answer taken ones in any order, publish,
// final check: BackendSide). After each step the ring must keep its
// contract:
// - kValid requests obey CheckValidRequest (pages, sectors, disk end, ro);
// - the device touches data pages only inside the data area, through
//   mappings it undoes (HostileGrants), and no shared byte outside the ring
//   (AddressSanitizer: the ring is allocated at its exact size);
// - used.idx is published as the number of responses put;
// - every request taken carries the head of its avail ring entry;
// - kNone agrees with HasRequests().
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend_side.h"
#include "fuzz_input.h"
#include "hostile_grants.h"
#include "transport/shared_index.h"
#include "transport/virtio/device_ring.h"
#include "transport/virtio/format.h"
#include "transport/virtio/queue_view.h"
#include "virtio_fuzz_input.h"

namespace pvdisk::fuzz {
namespace {

namespace virtio = transport::virtio;

// The driver's actions; the backend's (BackendAction) follow them.
enum FrontendAction : uint8_t {
  kWriteDesc,       // u16 index, 16 bytes
  kPushHead,        // u16 head: avail.ring[idx] = head; avail.idx + 1
  kSetAvailIdx,     // u16: forge avail.idx
  kSetDriverWords,  // u16 avail.flags, u16 used_event
  kWriteData,       // u32 offset, u8 length, bytes
  kFrontendActionCount,
};

class Harness {
 public:
  Harness(FuzzInput& in)
      : in_(in),
        size_(1u << (in.U8() % 9)),
        ring_(virtio::LayoutFor(size_).bytes),
        limits_(ReadVirtioLimits(in)),
        data_(FreshDataArea(limits_.data_pages)),
        grants_(data_.data(), limits_.data_pages, ring_.data(),
                virtio::LayoutFor(size_).used),  // descriptors, avail ring
        q_(ring_.data(), size_),
        device_(ring_.data(), size_, &grants_, limits_,
                in.U8() & 1 ? transport::NotifyMode::kAlways
                            : transport::NotifyMode::kEventIdx),
        backend_(&device_, &grants_, limits_, size_, Traits()) {}

  void Run() {
    backend_.RunScript(in_, kFrontendActionCount, [this](int action) {
      Step(static_cast<FrontendAction>(action));
    });
  }

 private:
  void Step(FrontendAction action) {
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
      case kWriteData:
        WriteVirtioData(in_, data_);
        break;
      case kFrontendActionCount:
        break;
    }
  }

  RingTraits Traits() {
    RingTraits traits;
    traits.published = [this] { return transport::LoadAcquire(q_.UsedIdx()); };
    traits.index_mask = UINT16_MAX;
    traits.next_id = [this](uint32_t taken) -> uint64_t {
      return transport::LoadRelaxed(q_.AvailRing(taken & (size_ - 1)));
    };
    traits.may_answer_itself = true;  // GET_ID
    return traits;
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
  BackendSide backend_;
};

}  // namespace
}  // namespace pvdisk::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pvdisk::fuzz::FuzzInput in(data, size);
  pvdisk::fuzz::Harness harness(in);
  harness.Run();
  return 0;
}
