// RingLender: an io_uring that its owner thread lends to I/O engines, so
// that their I/O and the owner's own commands (FUSE ring entries, in the
// inline placement) share one ring and one io_uring_enter per round.
//
// A borrowing engine queues SQEs on ring() and never enters the kernel for
// them: the owner's next io_uring_enter submits them with its own. The owner
// reaps every CQE and hands those whose user_data carries a sink's tag back
// to that sink (with the tag bits still set), on the owner's thread.
// Everything here is called on the owner thread only.
#pragma once

#include <liburing.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pvdisk::io {

class CqeSink {
 public:
  virtual ~CqeSink() = default;
  // One completion of an SQE the sink queued with its tag in user_data.
  virtual void OnCqe(uint64_t user_data, int32_t res) = 0;
  // The sink's requests on the ring whose completion it has not been
  // handed yet: I/O that would wait if the owner thread blocked (an armed
  // read that waits for an event, such as a kick eventfd's, is not one).
  // For RingLender::BorrowedInFlight. The default says none.
  virtual uint32_t InFlight() const { return 0; }
};

class RingLender {
 public:
  // The low kSinkBits bits of user_data are the sink's own; the bits above
  // are the tag the lender gave it.
  static constexpr int kSinkBits = 40;
  static constexpr uint64_t kSinkMask = (uint64_t{1} << kSinkBits) - 1;

  virtual ~RingLender() = default;
  // The shared ring. SQEs may be 128 bytes wide (IORING_SETUP_SQE128):
  // io_uring_get_sqe() handles that; prep helpers fill the first 64 bytes,
  // which is all that ordinary operations read.
  virtual io_uring* ring() = 0;
  // Routes CQEs carrying the returned tag to `sink` until Unlend(tag).
  // `sink` must stay valid until then.
  virtual uint64_t Lend(CqeSink* sink) = 0;
  virtual void Unlend(uint64_t tag) = 0;
  // Registers `buffers` as fixed buffers of the ring (READ_FIXED /
  // WRITE_FIXED). Returns the index of the first, the others following, or
  // -1 when the ring cannot take them (then use ordinary reads and writes).
  // They stay registered until the ring closes.
  virtual int AddFixedBuffers(const std::vector<iovec>& buffers) = 0;
  // The index of a fixed buffer of the ring that holds [data, data +
  // length), which the lender may register on the spot (memory of its own
  // that it lends for zero copy: the FUSE payloads); -1 when there is none
  // (then use an ordinary read or write).
  virtual int FixedBufferFor(const void* data, size_t length) = 0;
  // Registers `fds` as fixed files of the ring (IOSQE_FIXED_FILE). Returns
  // the fixed-file index of the first, the others following, or -1 when
  // the ring cannot take them (then name the plain descriptors). They stay
  // registered until RemoveFixedFiles or the ring closes. The default takes
  // none: a lender whose ring has room in its file table overrides it.
  virtual int AddFixedFiles(const std::vector<int>& fds) {
    (void)fds;
    return -1;
  }
  // Empties the `count` fixed-file slots from `base` (an AddFixedFiles
  // result) once nothing queued names them: the ring then holds no
  // reference to those files, so closing their descriptors really closes
  // them (and frees an image lock). The slots may be given out again.
  virtual void RemoveFixedFiles(int base, size_t count) {
    (void)base;
    (void)count;
  }
  // Whether completions wait for the owner's next round (posted, or
  // pending to be posted): a borrower that spins on the owner's thread
  // stops for them, so that the owner's other work (a FUSE request that
  // just arrived) does not wait for the spin. The default says none.
  virtual bool HasWaitingCompletions() { return false; }
  // The requests in flight on the ring of all the sinks it lends to
  // (CqeSink::InFlight, summed): what a borrower that blocks the owner's
  // thread (a flush run there: io/flush_policy.h) would hold up.
  virtual uint32_t BorrowedInFlight() { return 0; }
  // The requests the owner has taken and not yet answered (a FUSE queue
  // thread's: those it holds from their arrival until their reply is
  // committed). The default counts none.
  virtual uint32_t RequestsOpen() { return 0; }
};

}  // namespace pvdisk::io
