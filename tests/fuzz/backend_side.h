// BackendSide: what BackendLoop does with a device ring, one scripted step
// at a time, for the ring fuzzers; after each step it checks the contract
// the backend relies on (see request_check.h and the checks below).
#pragma once

#include <cerrno>
#include <cstdint>
#include <deque>
#include <functional>

#include "fuzz_input.h"
#include "hostile_grants.h"
#include "request_check.h"
#include "transport/device_ring.h"

namespace pvdisk::fuzz {

// The backend's actions in a ring fuzzer's script; they follow the
// protocol's frontend actions, so each target numbers them from its own
// first backend action.
enum BackendAction : uint8_t {
  kRaceNextMap,  // u32 offset, u8 value: HostileGrants::ArmRace
  kTake,         // TakeRequest, as BackendLoop::TakeRequests does
  kRespond,      // u8 which outstanding request, u8 result (ok, EIO, ENOTSUP)
  kPublish,      // PublishResponses
  kFinalCheck,   // FinalCheckForRequests
  kBackendActionCount,
};

// What differs between protocols.
struct RingTraits {
  // The published response index as the frontend reads it (blkif rsp_prod,
  // virtio used.idx), and the bits it has. Unset for a ring without one
  // (packed virtqueue): Publish() is then not checked against it.
  std::function<uint32_t()> published;
  uint32_t index_mask = UINT32_MAX;
  // The id the next request must carry, read from the shared ring before
  // the take (`taken`: requests taken so far): blkif the slot's id, virtio
  // the avail ring's head. The response echoes it, and the frontend finds
  // its request by it. Unset when the id is known only after the take
  // (packed virtqueue: the buffer id is in the chain's last entry).
  std::function<uint64_t(uint32_t taken)> next_id;
  // Protocol-specific checks of a valid request.
  std::function<void(const transport::DeviceRequest&)> check_valid;
  // Whether TakeRequest may answer a request itself (virtio GET_ID).
  bool may_answer_itself = false;
  // Whether the ring itself guarantees that requests taken and not answered
  // never outnumber its slots (blkif: else a response would overwrite a
  // request not read yet).
  bool bounds_unanswered = false;
};

class BackendSide {
 public:
  // `slots` is the ring's size: BackendLoop holds at most that many valid
  // requests at once.
  BackendSide(transport::DeviceRing* ring, HostileGrants* grants,
              const transport::DeviceLimits& limits, uint32_t slots,
              RingTraits traits)
      : ring_(ring),
        grants_(grants),
        limits_(limits),
        slots_(slots),
        traits_(std::move(traits)) {}

  void Step(BackendAction action, FuzzInput& in) {
    switch (action) {
      case kRaceNextMap: {
        uint32_t offset = in.U32();
        grants_->ArmRace(offset, in.U8());
        break;
      }
      case kTake:
        Take();
        break;
      case kRespond: {
        uint8_t which = in.U8();
        Respond(which, in.U8());
        break;
      }
      case kPublish:
        Publish();
        break;
      case kFinalCheck:
        ring_->FinalCheckForRequests();
        FUZZ_CHECK(grants_->Balanced(), "a mapping left behind");
        break;
      case kBackendActionCount:
        break;
    }
  }

  // Runs a whole script: each action byte picks one of the protocol's
  // `frontend_actions` actions (done by `frontend_step`) or, after them, a
  // backend action. At the end everything is answered and published.
  template <typename FrontendStep>
  void RunScript(FuzzInput& in, int frontend_actions,
                 FrontendStep frontend_step) {
    while (!in.empty()) {
      int action = in.U8() % (frontend_actions + int{kBackendActionCount});
      if (action < frontend_actions) {
        frontend_step(action);
      } else {
        Step(static_cast<BackendAction>(action - frontend_actions), in);
      }
    }
    Finish();
  }

  // Answers everything and publishes, as BackendLoop::Stop does.
  void Finish() {
    while (!outstanding_.empty()) Respond(0, 0);
    Publish();
    ring_->FinalCheckForRequests();
  }

 private:
  static int ResultFor(uint8_t code) {
    switch (code % 3) {
      case 0:
        return 0;
      case 1:
        return -EIO;
      default:
        return -EOPNOTSUPP;
    }
  }

  void Take() {
    // BackendLoop takes only while it has a free slot for a valid request,
    // and stops taking from a broken ring.
    if (broken_ || outstanding_.size() >= slots_) return;
    uint64_t id = traits_.next_id ? traits_.next_id(taken_) : 0;
    transport::DeviceRequest request;
    transport::TakeResult result = ring_->TakeRequest(&request);
    FUZZ_CHECK(grants_->Balanced(), "a mapping left behind");
    if (traits_.next_id && result != transport::TakeResult::kNone &&
        result != transport::TakeResult::kRingBroken) {
      FUZZ_CHECK(request.id == id, "the request does not carry its id");
    }
    switch (result) {
      case transport::TakeResult::kNone:
        FUZZ_CHECK(!ring_->HasRequests(),
                   "kNone, yet HasRequests() says a request waits");
        return;
      case transport::TakeResult::kRingBroken:
        broken_ = true;
        return;
      case transport::TakeResult::kAnswered:
        FUZZ_CHECK(traits_.may_answer_itself,
                   "the ring answered a request by itself");
        ++taken_;
        ++responded_;
        return;
      case transport::TakeResult::kInvalid:
      case transport::TakeResult::kUnsupported:
        ++taken_;
        CheckRoom();
        Put(request,
            result == transport::TakeResult::kInvalid ? -EINVAL : -EOPNOTSUPP);
        return;
      case transport::TakeResult::kValid:
        ++taken_;
        CheckRoom();
        CheckValidRequest(request, limits_);
        if (traits_.check_valid) traits_.check_valid(request);
        outstanding_.push_back(std::move(request));
        return;
    }
  }

  void CheckRoom() const {
    if (!traits_.bounds_unanswered) return;
    FUZZ_CHECK(static_cast<uint32_t>(taken_ - responded_) <= slots_,
               "more requests taken than the ring has room to answer");
  }

  void Respond(uint8_t which, uint8_t code) {
    if (outstanding_.empty()) return;
    auto it =
        outstanding_.begin() + static_cast<long>(which % outstanding_.size());
    Put(*it, ResultFor(code));
    outstanding_.erase(it);
  }

  void Put(const transport::DeviceRequest& request, int result) {
    ring_->PutResponse(request, result);
    ++responded_;
    FUZZ_CHECK(grants_->Balanced(), "a mapping left behind");
  }

  void Publish() {
    if (!traits_.published) {
      ring_->PublishResponses();
      return;
    }
    uint32_t before = traits_.published();
    transport::PushResult pushed = ring_->PublishResponses();
    uint32_t after = traits_.published();
    FUZZ_CHECK(after == (responded_ & traits_.index_mask),
               "the published index is not the number of responses put");
    FUZZ_CHECK((pushed == transport::PushResult::kNothing) == (before == after),
               "PublishResponses() misreported what it published");
  }

  transport::DeviceRing* ring_;
  HostileGrants* grants_;
  transport::DeviceLimits limits_;
  uint32_t slots_;
  RingTraits traits_;

  bool broken_ = false;
  uint32_t taken_ = 0;      // requests handed out, modulo 2^32
  uint32_t responded_ = 0;  // responses put, modulo 2^32
  std::deque<transport::DeviceRequest> outstanding_;
};

}  // namespace pvdisk::fuzz
