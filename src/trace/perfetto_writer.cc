#include "trace/perfetto_writer.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "stats/clock.h"

namespace pvdisk::trace {
namespace {

const char* OpName(uint8_t op) {
  switch (op) {
    case 0:
      return "read";
    case 1:
      return "write";
    case 2:
      return "flush";
    case 3:
      return "discard";
    default:
      return "write-zeroes";
  }
}

// A string as a JSON string (thread names are the only outside text).
std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

absl::StatusOr<std::unique_ptr<PerfettoWriter>> PerfettoWriter::Create(
    const std::string& path, ThreadName thread_name) {
  std::FILE* stream = std::fopen(path.c_str(), "wx");
  if (stream == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<PerfettoWriter> writer(new PerfettoWriter());
  // Time 0 of the timeline: before tracing is turned on, so before every
  // event of the trace. (Not the first event added: events come queue by
  // queue, and another queue's may be older.)
  writer->base_ns_ = stats::MonotonicNanos();
  writer->stream_ = stream;
  writer->thread_name_ = std::move(thread_name);
  std::fputs("{\"traceEvents\":[\n", stream);
  return writer;
}

PerfettoWriter::~PerfettoWriter() {
  if (stream_ != nullptr) std::fclose(stream_);
}

std::string PerfettoWriter::Us(uint64_t ns) const {
  uint64_t from = ns > base_ns_ ? ns - base_ns_ : 0;
  return absl::StrFormat("%d.%03d", from / 1000, from % 1000);
}

void PerfettoWriter::Line(const std::string& json) {
  if (!first_line_) std::fputs(",\n", stream_);
  first_line_ = false;
  std::fputs(json.c_str(), stream_);
}

void PerfettoWriter::Track(uint16_t queue, uint32_t tid) {
  uint32_t pid = uint32_t{queue} + 1;
  if (named_queues_.insert(queue).second) {
    Line(absl::StrCat(
        "{\"ph\":\"M\",\"name\":\"process_name\",\"ts\":0,"
        "\"pid\":",
        pid, ",\"tid\":0,\"args\":{\"name\":\"queue ", queue, "\"}}"));
  }
  if (tid != 0 && named_threads_.insert({queue, tid}).second) {
    Line(absl::StrCat(
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"ts\":0,\"pid\":", pid,
        ",\"tid\":", tid, ",\"args\":{\"name\":",
        Quote(absl::StrCat(thread_name_(tid), " ", tid)), "}}"));
  }
}

void PerfettoWriter::Slice(uint64_t id, uint16_t queue, uint32_t tid,
                           const char* name, uint64_t from, uint64_t to) {
  if (from == 0 || to == 0 || to < from) return;  // a step not recorded
  Track(queue, tid);
  uint32_t pid = uint32_t{queue} + 1;
  for (auto [ph, at] : {std::pair<const char*, uint64_t>{"b", from},
                        std::pair<const char*, uint64_t>{"e", to}}) {
    Line(absl::StrCat("{\"ph\":\"", ph, "\",\"cat\":\"request\",\"name\":\"",
                      name, "\",\"id\":", id, ",\"ts\":", Us(at),
                      ",\"pid\":", pid, ",\"tid\":", tid, "}"));
  }
}

void PerfettoWriter::Instant(uint16_t queue, uint32_t tid, const char* name,
                             uint64_t at) {
  Track(queue, tid);
  Line(absl::StrCat("{\"ph\":\"i\",\"s\":\"t\",\"name\":\"", name,
                    "\",\"ts\":", Us(at), ",\"pid\":", uint32_t{queue} + 1,
                    ",\"tid\":", tid, "}"));
}

void PerfettoWriter::Emit(const Request& request, uint16_t queue,
                          uint64_t arrival, uint64_t replied,
                          uint32_t reply_tid) {
  for (const Piece& piece : request.pieces) {
    uint64_t id = next_id_++;
    uint64_t begin = arrival != 0 ? arrival : piece.queued;
    uint64_t end = replied != 0 ? replied : piece.completed;
    std::string name =
        absl::StrCat(OpName(piece.op), " ", piece.bytes, " @ ", piece.sector);
    // The outer slice is opened first and closed last, so that the stages
    // nest in it (ends and begins in time order per id).
    Track(queue, piece.fuse_tid);
    uint32_t pid = uint32_t{queue} + 1;
    auto edge = [&](const char* ph, uint64_t at) {
      Line(absl::StrCat("{\"ph\":\"", ph, "\",\"cat\":\"request\",\"name\":",
                        Quote(name), ",\"id\":", id, ",\"ts\":", Us(at),
                        ",\"pid\":", pid, ",\"tid\":", piece.fuse_tid, "}"));
    };
    if (end == 0 || end < begin) continue;
    edge("b", begin);
    Slice(id, queue, piece.fuse_tid, "FUSE wait", arrival, piece.queued);
    Slice(id, queue, piece.fuse_tid, "staging", piece.queued, piece.issued);
    if (piece.taken != 0) {
      Slice(id, queue, piece.backend_tid, "ring", piece.issued, piece.taken);
      Slice(id, queue, piece.backend_tid, "backend take", piece.taken,
            piece.engine);
      Slice(id, queue, piece.backend_tid, "engine", piece.engine,
            piece.answered);
      Slice(id, queue, piece.complete_tid, "completion", piece.answered,
            piece.completed);
    } else {
      Slice(id, queue, piece.complete_tid, "ring", piece.issued,
            piece.completed);
    }
    Slice(id, queue, reply_tid, "reply", piece.completed, replied);
    edge("e", end);
  }
}

void PerfettoWriter::Add(const TraceEvent& event) {
  if (event.action == TraceAction::kLost) return;
  if (event.time_ns < base_ns_) return;  // older than the trace
  const IoKey io_key{event.queue, event.io};
  const RingKey ring_key{event.queue, event.ring_id};
  switch (event.action) {
    case TraceAction::kQueue: {
      auto it = requests_.find(io_key);
      // A request never replied to (its block request is the daemon's own,
      // e.g. a read-modify-write's) ends when it is reused.
      if (it != requests_.end() && it->second.open == 0) {
        Emit(it->second, event.queue, 0, 0, 0);
        requests_.erase(it);
      }
      Request& request = requests_[io_key];
      Piece piece;
      piece.sector = event.sector;
      piece.bytes = event.bytes;
      piece.op = event.flags & kOpMask;
      piece.fuse_tid = event.tid;
      piece.queued = event.time_ns;
      request.pieces.push_back(piece);
      ++request.open;
      return;
    }
    case TraceAction::kIssue:
    case TraceAction::kComplete: {
      auto it = requests_.find(io_key);
      if (it == requests_.end()) return;
      uint64_t end = event.sector + event.bytes / 512;
      for (Piece& piece : it->second.pieces) {
        bool inside = piece.sector >= event.sector &&
                      piece.sector + piece.bytes / 512 <= end;
        if (event.action == TraceAction::kIssue) {
          if (piece.issued != 0 || !inside) continue;
          piece.issued = event.time_ns;
          piece.ring_id = event.ring_id;
          break;
        }
        if (piece.completed != 0 || piece.ring_id != event.ring_id) continue;
        piece.completed = event.time_ns;
        piece.complete_tid = event.tid;
        auto ring = rings_.find(ring_key);
        if (ring != rings_.end()) {
          piece.taken = ring->second.taken;
          piece.engine = ring->second.engine;
          piece.answered = ring->second.answered;
          piece.backend_tid = ring->second.tid;
        }
        --it->second.open;
        break;
      }
      // Every piece the ring request carried reads the backend's steps,
      // so they are kept until the ring id is taken again.
      return;
    }
    case TraceAction::kTake:
      rings_[ring_key] = RingSteps{event.time_ns, 0, 0, event.tid};
      return;
    case TraceAction::kEngineQueued:
      rings_[ring_key].engine = event.time_ns;
      return;
    case TraceAction::kEngineDone:
      rings_[ring_key].answered = event.time_ns;
      return;
    case TraceAction::kReply: {
      auto it = requests_.find(io_key);
      if (it == requests_.end()) return;
      Emit(it->second, event.queue, event.aux, event.time_ns, event.tid);
      requests_.erase(it);
      return;
    }
    case TraceAction::kKick:
      Instant(event.queue, event.tid, "kick", event.time_ns);
      return;
    case TraceAction::kInterrupt:
      Instant(event.queue, event.tid, "interrupt", event.time_ns);
      return;
    default:
      return;  // M, F, G, I: inside staging
  }
}

absl::Status PerfettoWriter::Finish(uint64_t lost) {
  for (const auto& [key, request] : requests_) {
    Emit(request, key.first, 0, 0, 0);
  }
  requests_.clear();
  std::fprintf(stream_, "\n],\"otherData\":{\"lost_events\":\"%llu\"}}\n",
               static_cast<unsigned long long>(lost));
  bool failed = std::ferror(stream_) != 0;
  if (std::fclose(stream_) != 0) failed = true;
  stream_ = nullptr;
  if (failed) return absl::InternalError("writing the trace failed");
  return absl::OkStatus();
}

}  // namespace pvdisk::trace
