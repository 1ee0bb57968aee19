// Fuzzes PackedDeviceRing, the device side of a packed virtqueue, driven by
// a hostile driver. The input (layout in make_seeds.py) is a configuration
// followed by a script: driver actions (write whole ring entries, hand over
// the next entries with the owner bits of their lap or of the wrong one,
// set any entry's flags, move the driver's position, set the driver's event
// suppression, write headers and indirect tables into the data area, race
// the device's reads) interleaved with what BackendLoop does (BackendSide).
// After each step the ring must keep its contract:
// - kValid requests obey CheckValidRequest (pages, sectors, disk end, ro);
// - the device touches data pages only inside the data area, through
//   mappings it undoes (HostileGrants), and no shared byte outside the ring
//   (AddressSanitizer: the ring is allocated at its exact size);
// - requests taken and not answered never outnumber the ring's entries;
// - kNone agrees with HasRequests().
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend_side.h"
#include "fuzz_input.h"
#include "hostile_grants.h"
#include "transport/virtio_packed/device_ring.h"
#include "transport/virtio_packed/format.h"
#include "transport/virtio_packed/ring_view.h"
#include "virtio_fuzz_input.h"

namespace pvdisk::fuzz {
namespace {

namespace vp = transport::virtio_packed;

// The driver's actions; the backend's (BackendAction) follow them.
enum FrontendAction : uint8_t {
  kWriteEntry,      // u16 entry, 16 bytes (flags included)
  kHandOver,        // u8 n, u8 wrong-lap mask: the next n entries' owner bits
  kSetFlags,        // u16 entry, u16 flags
  kMovePosition,    // u8 n: the driver's position moves on by n
  kSetDriverEvent,  // u16 off_wrap, u16 flags
  kWriteData,       // u32 offset, u8 length, bytes
  kFrontendActionCount,
};

class Harness {
 public:
  Harness(FuzzInput& in)
      : in_(in),
        size_(1u << (in.U8() % 9)),
        ring_(vp::LayoutFor(size_).bytes),
        limits_(ReadVirtioLimits(in)),
        data_(FreshDataArea(limits_.data_pages)),
        grants_(data_.data(), limits_.data_pages, ring_.data(),
                vp::LayoutFor(size_).device_event),  // entries, driver event
        view_(ring_.data(), size_),
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
      case kWriteEntry: {
        uint32_t entry = in_.U16() % size_;
        in_.Bytes(&view_.At(entry), sizeof(vp::Desc));
        break;
      }
      case kHandOver: {
        // As a driver does: the later entries first, the first one last.
        uint32_t n = 1 + in_.U8() % 8;
        uint8_t wrong_lap = in_.U8();
        for (uint32_t i = n; i-- > 0;) {
          uint32_t position = position_ + i;
          bool wrap = vp::WrapOf(position, size_);
          if (wrong_lap & (1u << i)) wrap = !wrap;
          uint32_t entry = vp::EntryOf(position, size_);
          uint16_t flags = static_cast<uint16_t>(
              (view_.LoadFlags(entry) & ~vp::kOwnerBits) | vp::AvailBits(wrap));
          view_.StoreFlags(entry, flags);
        }
        position_ += n;
        break;
      }
      case kSetFlags: {
        uint32_t entry = in_.U16() % size_;
        view_.StoreFlags(entry, in_.U16());
        break;
      }
      case kMovePosition:
        position_ += in_.U8();
        break;
      case kSetDriverEvent: {
        vp::EventSuppress event;
        event.off_wrap = in_.U16();
        event.flags = in_.U16();
        view_.StoreDriverEvent(event);
        break;
      }
      case kWriteData:
        WriteVirtioData(in_, data_);
        break;
      case kFrontendActionCount:
        break;
    }
  }

  static RingTraits Traits() {
    RingTraits traits;
    traits.may_answer_itself = true;  // GET_ID
    // The device owns every entry of a request until it answers it, and a
    // request takes at least one.
    traits.bounds_unanswered = true;
    return traits;
  }

  FuzzInput& in_;
  uint32_t size_;
  std::vector<uint8_t> ring_;
  transport::DeviceLimits limits_;
  std::span<uint8_t> data_;  // the frontend's data pages
  HostileGrants grants_;
  vp::RingView view_;  // the driver's view of the same memory
  transport::PackedDeviceRing device_;

  uint32_t position_ = 0;  // the driver's position counter
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
