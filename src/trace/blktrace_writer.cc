#include "trace/blktrace_writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pvdisk::trace {
namespace {

// The direction and flags the kernel records for each operation: reads R;
// writes W with S (FUSE's direct writes are synchronous); a flush is a
// write with F; discards D; write-zeroes W.
uint32_t Categories(uint8_t op) {
  switch (op) {
    case 0:  // read
      return blk::kCatRead;
    case 1:  // write
      return blk::kCatWrite | blk::kCatSync;
    case 2:  // flush
      return blk::kCatWrite | blk::kCatFlush | blk::kCatSync;
    case 3:  // discard
      return blk::kCatWrite | blk::kCatDiscard;
    default:  // write-zeroes
      return blk::kCatWrite;
  }
}

}  // namespace

uint32_t BlktraceAction(const TraceEvent& event) {
  uint32_t categories = Categories(event.flags & kOpMask);
  bool lead = (event.flags & kLeadFlag) != 0;
  switch (event.action) {
    case TraceAction::kQueue:
      return blk::Action(categories | blk::kCatQueue, blk::kQueue);
    case TraceAction::kBackMerge:
      return blk::Action(categories | blk::kCatQueue, blk::kBackMerge);
    case TraceAction::kFrontMerge:
      return blk::Action(categories | blk::kCatQueue, blk::kFrontMerge);
    case TraceAction::kGetRequest:
      return blk::Action(categories | blk::kCatQueue, blk::kGetRequest);
    case TraceAction::kInsert:
      return blk::Action(categories | blk::kCatQueue, blk::kInsert);
    case TraceAction::kIssue:
      return lead ? blk::Action(categories | blk::kCatIssue, blk::kIssue) : 0;
    case TraceAction::kComplete:
      return lead ? blk::Action(categories | blk::kCatComplete, blk::kComplete)
                  : 0;
    default:
      return 0;
  }
}

absl::StatusOr<std::unique_ptr<BlktraceWriter>> BlktraceWriter::Create(
    const std::string& dir, const std::string& name, uint32_t queues,
    uint32_t device, ThreadName thread_name) {
  std::unique_ptr<BlktraceWriter> writer(new BlktraceWriter());
  writer->device_ = device;
  writer->thread_name_ = std::move(thread_name);
  writer->files_.resize(queues);
  for (uint32_t q = 0; q < queues; ++q) {
    std::string path = absl::StrCat(dir, "/", name, ".blktrace.", q);
    std::FILE* stream = std::fopen(path.c_str(), "wbx");
    if (stream == nullptr) {
      int error = errno;
      for (const std::string& made : writer->paths_) unlink(made.c_str());
      for (File& file : writer->files_) {
        if (file.stream != nullptr) std::fclose(file.stream);
        file.stream = nullptr;
      }
      return absl::InvalidArgumentError(
          absl::StrCat("cannot create ", path, ": ", std::strerror(error)));
    }
    writer->files_[q].stream = stream;
    writer->paths_.push_back(path);
  }
  return writer;
}

BlktraceWriter::~BlktraceWriter() {
  for (File& file : files_) {
    if (file.stream != nullptr) std::fclose(file.stream);
  }
}

void BlktraceWriter::Write(File& file, uint32_t cpu, blk::Record record,
                           const void* pdu, uint16_t pdu_len) {
  record.sequence = ++file.sequence;
  record.device = device_;
  record.cpu = cpu;
  record.pdu_len = pdu_len;
  if (std::fwrite(&record, sizeof(record), 1, file.stream) != 1 ||
      (pdu_len > 0 && std::fwrite(pdu, pdu_len, 1, file.stream) != 1)) {
    write_failed_ = true;
  }
}

void BlktraceWriter::Add(const TraceEvent& event) {
  if (event.queue >= files_.size()) return;
  uint32_t action = BlktraceAction(event);
  if (action == 0) return;
  File& file = files_[event.queue];
  file.last_ns = std::max(file.last_ns, event.time_ns);
  if (file.named.insert(event.tid).second) {
    char comm[16] = {};
    std::string thread = thread_name_(event.tid);
    std::memcpy(comm, thread.data(), std::min(thread.size(), sizeof(comm) - 1));
    blk::Record note;
    note.time = event.time_ns;
    note.pid = event.tid;
    note.action = blk::Action(blk::kCatNotify, blk::kNoteProcess);
    Write(file, event.queue, note, comm, sizeof(comm));
  }
  blk::Record record;
  record.time = event.time_ns;
  record.sector = event.sector;
  record.bytes = event.bytes;
  record.action = action;
  record.pid = event.tid;
  record.error = (event.flags & kFailedFlag) != 0 ? EIO : 0;
  Write(file, event.queue, record);
}

absl::Status BlktraceWriter::Finish(const std::vector<uint64_t>& lost) {
  for (uint32_t q = 0; q < files_.size(); ++q) {
    File& file = files_[q];
    std::string text =
        absl::StrCat("pvdisk: lost ", q < lost.size() ? lost[q] : 0, " events");
    blk::Record note;
    note.time = file.last_ns;
    note.action = blk::Action(blk::kCatNotify, blk::kNoteMessage);
    Write(file, q, note, text.data(), static_cast<uint16_t>(text.size()));
    if (std::fclose(file.stream) != 0) write_failed_ = true;
    file.stream = nullptr;
  }
  if (write_failed_) {
    return absl::InternalError(absl::StrCat("writing ", paths_.front(),
                                            " and the other queues' files "
                                            "failed (disk full?)"));
  }
  return absl::OkStatus();
}

}  // namespace pvdisk::trace
