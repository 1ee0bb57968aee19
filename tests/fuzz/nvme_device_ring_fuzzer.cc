// Fuzzes NvmeDeviceRing, the device side of an NVMe queue pair, driven by a
// hostile driver. The input (layout in make_seeds.py) is a configuration
// followed by a script: driver actions (write any SQ entry, push a command
// at the tail, set the SQ tail and CQ head doorbells and the CQ EventIdx to
// any value, consume completions as a driver does, write PRP lists, SGL
// segments and DSM ranges into the data area, race the device's reads)
// interleaved with what BackendLoop does (BackendSide). After each step the
// ring must keep its contract:
// - kValid requests obey CheckValidRequest (pages, sectors, disk end, ro);
// - the device touches data pages only inside the data area, through
//   mappings it undoes (HostileGrants), and no shared byte outside the
//   queue pair (AddressSanitizer: the ring is allocated at its exact size);
// - requests taken and not answered never outnumber the queue's entries;
// - kNone agrees with HasRequests().
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "backend_side.h"
#include "fuzz_input.h"
#include "hostile_grants.h"
#include "transport/nvme/device_ring.h"
#include "transport/nvme/format.h"
#include "virtio_fuzz_input.h"

namespace pvdisk::fuzz {
namespace {

namespace nv = transport::nvme;

// The driver's actions; the backend's (BackendAction) follow them.
enum FrontendAction : uint8_t {
  kWriteEntry,  // u16 entry, 64 bytes
  kPush,        // 64 bytes: the command at the tail; the tail doorbell moves
  kSetSqTail,   // u32
  kSetCqHead,   // u32
  kSetCqEvent,  // u32
  kConsume,     // u8 n: consume up to n completions, as a driver does
  kWriteData,   // u32 offset, u8 length, bytes
  kFrontendActionCount,
};

transport::RingConfig ReadConfig(FuzzInput& in) {
  const uint8_t mode = in.U8();
  transport::RingConfig config(mode & 1 ? transport::NotifyMode::kAlways
                                        : transport::NotifyMode::kEventIdx);
  if (mode & 2) {
    config.coalesce.threshold = 1 + in.U8();
    config.coalesce.time_us = 1 + in.U16() % 25500;
  }
  return config;
}

class Harness {
 public:
  Harness(FuzzInput& in)
      : in_(in),
        size_(2u << (in.U8() % 8)),
        layout_(nv::LayoutFor(size_)),
        ring_(layout_.bytes),
        limits_(ReadVirtioLimits(in)),
        data_(FreshDataArea(limits_.data_pages)),
        grants_(data_.data(), limits_.data_pages, ring_.data(), layout_.bytes),
        device_(ring_.data(), size_, &grants_, limits_, ReadConfig(in)),
        backend_(&device_, &grants_, limits_, size_, Traits()) {}

  void Run() {
    backend_.RunScript(in_, kFrontendActionCount, [this](int action) {
      Step(static_cast<FrontendAction>(action));
    });
  }

 private:
  nv::Command* Sq() {
    return reinterpret_cast<nv::Command*>(ring_.data() + layout_.sq);
  }
  nv::Completion* Cq() {
    return reinterpret_cast<nv::Completion*>(ring_.data() + layout_.cq);
  }
  nv::Doorbells& Bells() {
    return *reinterpret_cast<nv::Doorbells*>(ring_.data() + layout_.doorbells);
  }

  void Step(FrontendAction action) {
    switch (action) {
      case kWriteEntry: {
        uint32_t entry = in_.U16() % size_;
        in_.Bytes(&Sq()[entry], sizeof(nv::Command));
        break;
      }
      case kPush:
        in_.Bytes(&Sq()[tail_ % size_], sizeof(nv::Command));
        ++tail_;
        transport::StoreRelease(Bells().sq_tail, tail_ % size_);
        break;
      case kSetSqTail:
        transport::StoreRelease(Bells().sq_tail, in_.U32());
        break;
      case kSetCqHead:
        transport::StoreRelease(Bells().cq_head, in_.U32());
        break;
      case kSetCqEvent:
        transport::StoreRelease(Bells().cq_event, in_.U32());
        break;
      case kConsume: {
        uint32_t n = in_.U8();
        for (uint32_t i = 0; i < n; ++i) {
          const bool phase = ((head_ / size_) & 1) == 0;
          uint16_t status = transport::LoadAcquire(Cq()[head_ % size_].status);
          if ((status & 1) != (phase ? 1 : 0)) break;
          ++head_;
        }
        transport::StoreRelease(Bells().cq_head, head_ % size_);
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
    traits.may_answer_itself = true;  // Dataset Management hints
    // A command is taken only while its completion has room in the CQ.
    traits.bounds_unanswered = true;
    return traits;
  }

  FuzzInput& in_;
  uint32_t size_;
  nv::RingLayout layout_;
  std::vector<uint8_t> ring_;
  transport::DeviceLimits limits_;
  std::span<uint8_t> data_;  // the frontend's data pages
  HostileGrants grants_;
  transport::NvmeDeviceRing device_;

  uint32_t tail_ = 0;  // the driver's SQ position
  uint32_t head_ = 0;  // the driver's CQ position
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
