#include "image/qcow2_engine.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "io/engine_decorator.h"
#include "io/request_check.h"

namespace pvdisk::image {
namespace {

using qcow2::L2Kind;

// Calls `fn(base, bytes)` for each part of bytes [offset, offset + length)
// of the iovecs.
template <typename Fn>
void ForEachIovPart(const iovec* iov, int count, uint64_t offset,
                    uint64_t length, Fn fn) {
  for (int i = 0; i < count && length > 0; ++i) {
    const uint64_t len = iov[i].iov_len;
    if (offset >= len) {
      offset -= len;
      continue;
    }
    const uint64_t n = std::min(len - offset, length);
    fn(static_cast<uint8_t*>(iov[i].iov_base) + offset, n);
    offset = 0;
    length -= n;
  }
}

class Qcow2Engine final : public io::EngineDecorator {
 public:
  Qcow2Engine(std::unique_ptr<io::IoEngine> inner, Qcow2State& state,
              uint32_t depth, uint32_t capacity)
      : EngineDecorator(std::move(inner), "qcow2"),
        state_(state),
        capacity_(capacity),
        requests_(depth) {
    free_requests_.reserve(depth);
    for (uint32_t i = depth; i > 0; --i) free_requests_.push_back(i - 1);
  }

  int Queue(const io::IoRequest& request) override {
    if (free_requests_.empty()) return -EBUSY;
    const bool changes =
        request.op != io::IoOp::kRead && request.op != io::IoOp::kFlush;
    if (changes && state_.read_only()) return -EROFS;
    if (request.op != io::IoOp::kFlush) {
      if (int rc = io::CheckRequest(request, state_.size()); rc != 0) {
        return rc;
      }
    }
    const uint32_t index = free_requests_.back();
    free_requests_.pop_back();
    Request& r = requests_[index];
    r = Request{request.tag,
                request.length,
                request.iov,
                request.iov_count,
                request.buffer_index,
                1,
                0};
    if (request.op == io::IoOp::kFlush) {
      if (!state_.read_only()) {
        // The journal's metadata first (stage by stage), then this flush
        // makes its last stage and every completed write durable.
        if (!state_.Commit(counts_).ok()) Fail(r, -EIO);
        io::IoRequest flush;
        flush.op = io::IoOp::kFlush;
        Issue(index, flush, {});
      }
    } else {
      const uint64_t cluster = state_.cluster_size();
      uint64_t done = 0;
      while (done < request.length) {
        const uint64_t voff = request.offset + done;
        const uint64_t n =
            std::min(request.length - done, cluster - voff % cluster);
        switch (request.op) {
          case io::IoOp::kRead:
            ReadPiece(index, voff, n, done);
            break;
          case io::IoOp::kWrite:
            WritePiece(index, voff, n, done);
            break;
          default:
            r.changed = true;
            if (!state_.Deallocate(request.op, voff, n, counts_).ok()) {
              Fail(r, -EIO);
            }
            break;
        }
        done += n;
      }
    }
    Finish(index);  // the guard taken above
    return 0;
  }

  int Run(bool wait, std::vector<io::IoCompletion>& out) override {
    return Step(out, [&](bool may_wait) {
      return inner().Run(wait && may_wait, inner_out_);
    });
  }

  int RunUntil(int64_t deadline_ns,
               std::vector<io::IoCompletion>& out) override {
    return Step(out, [&](bool may_wait) {
      return may_wait ? inner().RunUntil(deadline_ns, inner_out_)
                      : inner().Run(false, inner_out_);
    });
  }

  uint32_t inflight() const override {
    return static_cast<uint32_t>(requests_.size() - free_requests_.size());
  }

  bool TakeFormatCounts(io::FormatCounts& out) override {
    out.l2_hits += counts_.l2_hits;
    out.l2_misses += counts_.l2_misses;
    out.meta_reads += counts_.meta_reads;
    out.meta_writes += counts_.meta_writes;
    out.clusters_allocated += counts_.clusters_allocated;
    out.cow_bytes += counts_.cow_bytes;
    out.compressed_reads += counts_.compressed_reads;
    counts_ = {};
    return true;
  }

 private:
  struct Request {
    uint64_t tag = 0;
    uint64_t length = 0;
    const iovec* iov = nullptr;
    int iov_count = 0;
    int buffer_index = -1;
    int pending = 0;       // pieces (and the guard while Queue() runs)
    int64_t result = 0;    // 0, or the first error
    bool changed = false;  // it changed metadata (allocated, deallocated)
  };
  // An I/O on the inner engine for a piece of request `request`.
  struct InnerIo {
    io::IoRequest io;
    std::vector<iovec> iov;  // the piece's part of the request's buffers
    uint32_t request = 0;
  };

  static void Fail(Request& r, int64_t error) {
    if (r.result == 0) r.result = error;
  }

  // One piece done: the request completes with its last.
  void Finish(uint32_t index) {
    Request& r = requests_[index];
    if (--r.pending > 0) return;
    const io::IoCompletion c{
        r.tag, r.result < 0 ? r.result : static_cast<int64_t>(r.length), false};
    if (r.changed && state_.commit_before_answer()) {
      uncommitted_.push_back(c);
    } else {
      ready_.push_back(c);
    }
    free_requests_.push_back(index);
  }

  void Zero(const Request& r, uint64_t at, uint64_t length) {
    ForEachIovPart(r.iov, r.iov_count, at, length,
                   [](uint8_t* p, uint64_t n) { std::memset(p, 0, n); });
  }

  // Issues `io` for request `index`, on bytes [at, at + io.length) of its
  // buffers (kRead/kWrite), or keeps it for later when the inner engine is
  // full.
  void Issue(uint32_t index, io::IoRequest io,
             std::pair<uint64_t, uint64_t> range) {
    Request& r = requests_[index];
    ++r.pending;
    uint32_t slot;
    if (!free_inner_.empty()) {
      slot = free_inner_.back();
      free_inner_.pop_back();
    } else {
      slot = static_cast<uint32_t>(inner_.size());
      inner_.push_back(std::make_unique<InnerIo>());
    }
    InnerIo& in = *inner_[slot];
    in.request = index;
    in.io = io;
    in.io.tag = slot;
    in.io.buffer_index = -1;
    if (io.op == io::IoOp::kRead || io.op == io::IoOp::kWrite) {
      if (range.first == 0 && range.second == r.length) {
        in.io.iov = r.iov;  // the whole request: its own buffers
        in.io.iov_count = r.iov_count;
        in.io.buffer_index = r.buffer_index;
      } else {
        in.iov.clear();
        ForEachIovPart(r.iov, r.iov_count, range.first, range.second,
                       [&](uint8_t* p, uint64_t n) {
                         in.iov.push_back(iovec{p, n});
                       });
        in.io.iov = in.iov.data();
        in.io.iov_count = static_cast<int>(in.iov.size());
        if (r.iov_count == 1) in.io.buffer_index = r.buffer_index;
      }
      in.io.length = range.second;
    }
    if (backlog_.empty() && Submit(slot)) return;
    backlog_.push_back(slot);
  }

  // Queues inner I/O `slot`; false when the inner engine has no room.
  bool Submit(uint32_t slot) {
    if (inner().inflight() >= capacity_) return false;
    InnerIo& in = *inner_[slot];
    const int rc = inner().Queue(in.io);
    if (rc == -EBUSY) return false;
    if (rc < 0) Done(slot, rc);
    return true;
  }

  // Issues what the backlog holds while the inner engine has room.
  void Pump() {
    while (!backlog_.empty() && Submit(backlog_.front())) {
      backlog_.pop_front();
    }
  }

  // Inner I/O `slot` finished with `result`.
  void Done(uint32_t slot, int64_t result) {
    InnerIo& in = *inner_[slot];
    if (result < 0) Fail(requests_[in.request], result);
    free_inner_.push_back(slot);
    Finish(in.request);
  }

  // Reads virtual [voff, voff + length) of layer `layer` into bytes
  // [at, at + length) of request `index`'s buffers.
  void ReadLayer(uint32_t index, size_t layer, uint64_t voff, uint64_t length,
                 uint64_t at) {
    Request& r = requests_[index];
    while (length > 0) {
      if (layer >= state_.layers()) return Zero(r, at, length);
      const qcow2::ChainLayer& l = state_.chain().layers()[layer];
      if (voff >= l.size) return Zero(r, at, length);
      if (!l.qcow2) {  // raw: the same offset, zeros past its end
        const uint64_t n = std::min(length, l.size - voff);
        ReadFile(index, layer, voff, n, at, state_.FileEnd(layer));
        if (n < length) Zero(r, at + n, length - n);
        return;
      }
      absl::StatusOr<qcow2::Mapping> m = state_.MapShared(layer, voff, counts_);
      if (!m.ok()) return Fail(r, -EIO);
      const uint64_t n = std::min(length, m->bytes);
      switch (m->kind) {
        case L2Kind::kData:
          ReadFile(index, layer, m->host_offset, n, at, state_.FileEnd(layer));
          break;
        case L2Kind::kZero:
          Zero(r, at, n);
          break;
        case L2Kind::kUnallocated:
          ReadLayer(index, layer + 1, voff, n, at);
          break;
        case L2Kind::kCompressed:
          if (!ReadCompressed(r, layer, *m, voff, n, at)) return Fail(r, -EIO);
          break;
      }
      voff += n;
      length -= n;
      at += n;
    }
  }

  // Copies virtual [voff, voff + length) of compressed cluster `m` of
  // layer `layer` into [at, at + length) of `r`'s buffers; false when it
  // does not inflate. Synchronous on this thread (pread and inflate); the
  // last cluster inflated is kept, so reads smaller than a cluster inflate
  // it once. Nothing writes compressed data, so a host offset names the
  // same compressed bytes for as long as an entry names it.
  bool ReadCompressed(const Request& r, size_t layer, const qcow2::Mapping& m,
                      uint64_t voff, uint64_t length, uint64_t at) {
    const uint64_t cluster = state_.cluster_size();
    if (inflated_layer_ != layer || inflated_from_ != m.host_offset) {
      inflated_.resize(cluster);
      inflated_from_ = ~0ull;
      if (!state_.chain().ReadCompressed(layer, m, scratch_, inflated_).ok()) {
        return false;
      }
      inflated_layer_ = layer;
      inflated_from_ = m.host_offset;
      ++counts_.compressed_reads;
    }
    const uint8_t* from = inflated_.data() + voff % cluster;
    ForEachIovPart(r.iov, r.iov_count, at, length, [&](uint8_t* p, uint64_t n) {
      std::memcpy(p, from, n);
      from += n;
    });
    return true;
  }

  // Reads file `file` at `host` into [at, at + length) of the request's
  // buffers; what lies past `end` (the file's end) reads as zeros.
  void ReadFile(uint32_t index, size_t file, uint64_t host, uint64_t length,
                uint64_t at, uint64_t end) {
    // Whole sectors on the inner engine (it may use O_DIRECT); the bytes of
    // a last sector the file ends inside are read here, the rest are zeros.
    Request& r = requests_[index];
    const uint64_t inside =
        host >= end ? 0 : std::min(length, (end - host) / 512 * 512);
    if (inside < length) {
      const uint64_t tail =
          host + inside >= end ? 0
                               : std::min(length - inside, end - host - inside);
      Zero(r, at + inside + tail, length - inside - tail);
      if (tail > 0) {
        std::vector<uint8_t> bytes(tail);
        if (!state_.ReadFileBytes(file, host + inside, bytes).ok()) {
          return Fail(r, -EIO);
        }
        const uint8_t* from = bytes.data();
        ForEachIovPart(r.iov, r.iov_count, at + inside, tail,
                       [&](uint8_t* p, uint64_t n) {
                         std::memcpy(p, from, n);
                         from += n;
                       });
      }
    }
    if (inside == 0) return;
    io::IoRequest io;
    io.op = io::IoOp::kRead;
    io.file = static_cast<uint16_t>(file);
    io.offset = host;
    Issue(index, io, {at, inside});
  }

  void ReadPiece(uint32_t index, uint64_t voff, uint64_t length, uint64_t at) {
    ReadLayer(index, 0, voff, length, at);
  }

  void WritePiece(uint32_t index, uint64_t voff, uint64_t length, uint64_t at) {
    Request& r = requests_[index];
    std::optional<uint64_t> host;
    {
      absl::StatusOr<qcow2::Mapping> m = state_.MapShared(0, voff, counts_);
      if (!m.ok()) return Fail(r, -EIO);
      // (With subclusters the mapping may hold for part of the piece.)
      if (m->kind == L2Kind::kData && m->writable_in_place &&
          m->bytes >= length) {
        host = m->host_offset;
      }
    }
    if (!host) {
      data_.resize(length);
      uint8_t* to = data_.data();
      ForEachIovPart(r.iov, r.iov_count, at, length,
                     [&](uint8_t* p, uint64_t n) {
                       std::memcpy(to, p, n);
                       to += n;
                     });
      r.changed = true;
      absl::StatusOr<std::optional<uint64_t>> written =
          state_.WriteAllocating(voff, data_, counts_);
      if (!written.ok()) return Fail(r, -EIO);
      if (!written->has_value()) return;  // allocated and written
      host = **written;
    }
    io::IoRequest io;
    io.op = io::IoOp::kWrite;
    io.file = 0;
    io.offset = *host;
    Issue(index, io, {at, length});
  }

  // Commits the state's journal and moves the answers that waited for it
  // to ready_ (failed with EIO if the commit failed).
  void AnswerCommitted() {
    if (uncommitted_.empty()) return;
    const bool committed = state_.Commit(counts_).ok();
    for (io::IoCompletion c : uncommitted_) {
      if (!committed) c.result = -EIO;
      ready_.push_back(c);
    }
    uncommitted_.clear();
  }

  // Pumps the backlog, reaps the inner engine with `reap(may_wait)` (it
  // may wait only when nothing is ready to return) and turns its
  // completions into the requests' (answers waiting for a commit count as
  // ready). Counts as Run() does: every completion
  // appended and every inner completion consumed without one.
  template <typename Reap>
  int Step(std::vector<io::IoCompletion>& out, Reap reap) {
    Pump();
    int events = 0;
    inner_out_.clear();
    const int rc = reap(ready_.empty() && uncommitted_.empty());
    if (rc < 0) return rc;
    for (const io::IoCompletion& c : inner_out_) {
      if (c.wake) {
        out.push_back(c);
        ++events;
        continue;
      }
      const size_t before = ready_.size();
      Done(static_cast<uint32_t>(c.tag), c.result);
      if (ready_.size() == before) ++events;  // progress, no completion
    }
    Pump();
    AnswerCommitted();
    events += static_cast<int>(ready_.size());
    out.insert(out.end(), ready_.begin(), ready_.end());
    ready_.clear();
    return events;
  }

  Qcow2State& state_;
  const uint32_t capacity_;
  std::vector<Request> requests_;
  std::vector<uint32_t> free_requests_;
  std::vector<std::unique_ptr<InnerIo>> inner_;  // by inner tag
  std::vector<uint32_t> free_inner_;
  std::deque<uint32_t> backlog_;  // inner I/Os waiting for room
  std::vector<io::IoCompletion> ready_;
  // Answers of requests that changed metadata, waiting for the commit
  // (commit_before_answer only).
  std::vector<io::IoCompletion> uncommitted_;
  std::vector<io::IoCompletion> inner_out_;
  std::vector<uint8_t> data_;  // an allocating write's bytes
  Qcow2Counts counts_;
  // The last compressed cluster inflated (ReadCompressed), and the buffer
  // its compressed bytes were read into.
  std::vector<uint8_t> inflated_;
  std::vector<uint8_t> scratch_;
  size_t inflated_layer_ = 0;
  uint64_t inflated_from_ = ~0ull;
};

}  // namespace

std::unique_ptr<io::IoEngine> MakeQcow2Engine(
    std::unique_ptr<io::IoEngine> inner, Qcow2State& state, uint32_t depth,
    uint32_t capacity) {
  return std::make_unique<Qcow2Engine>(std::move(inner), state, depth,
                                       capacity);
}

}  // namespace pvdisk::image
