#include "trace/trace_control.h"

#include <cerrno>
#include <cstring>

namespace pvdisk::trace {

TraceControl::~TraceControl() {
  for (auto& [handle, session] : sessions_) {
    for (QueueTrace* queue : session.queues) queue->Stop();
  }
}

uint64_t TraceControl::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t handle = next_handle_++;
  sessions_[handle] = Session{};
  return handle;
}

int TraceControl::Select(uint64_t handle, std::string_view command) {
  size_t space = command.find(' ');
  if (space == std::string_view::npos) return -EINVAL;
  std::string_view scope_word = command.substr(0, space);
  std::string_view disk = command.substr(space + 1);
  TraceScope scope;
  if (scope_word == "block") {
    scope = TraceScope::kBlock;
  } else if (scope_word == "all") {
    scope = TraceScope::kAll;
  } else {
    return -EINVAL;
  }
  if (disk.empty()) return -EINVAL;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(handle);
  if (it == sessions_.end() || !it->second.disk.empty()) return -EINVAL;
  for (const auto& [other, session] : sessions_) {
    if (session.disk == disk) return -EBUSY;
  }
  std::vector<QueueTrace*> queues = find_disk_(disk);
  if (queues.empty()) return -ENOENT;
  it->second.disk = std::string(disk);
  it->second.queues = std::move(queues);
  for (QueueTrace* queue : it->second.queues) queue->Start(scope);
  return 0;
}

int TraceControl::Read(uint64_t handle, size_t max, std::string* out) {
  out->clear();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(handle);
  if (it == sessions_.end() || it->second.disk.empty()) return -EINVAL;
  Session& session = it->second;
  size_t room = max / sizeof(TraceEvent);
  std::vector<TraceEvent> events(room);
  size_t used = 0;
  // Lost counts first, so that a reader learns of a gap before what
  // follows it.
  for (QueueTrace* queue : session.queues) {
    if (used == room) break;
    uint64_t lost = queue->TakeLost();
    if (lost == 0) continue;
    TraceEvent& event = events[used++];
    event = TraceEvent{};
    event.action = TraceAction::kLost;
    event.queue = queue->queue();
    event.aux = lost;
  }
  // Round-robin over the queues so that a busy one cannot starve the rest.
  size_t n = session.queues.size();
  for (size_t i = 0; i < n && used < room; ++i) {
    QueueTrace* queue = session.queues[(session.next_queue + i) % n];
    used += queue->Drain(events.data() + used, room - used);
  }
  session.next_queue = (session.next_queue + 1) % n;
  out->assign(reinterpret_cast<const char*>(events.data()),
              used * sizeof(TraceEvent));
  return 0;
}

void TraceControl::Release(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(handle);
  if (it == sessions_.end()) return;
  for (QueueTrace* queue : it->second.queues) queue->Stop();
  sessions_.erase(it);
}

void TraceControl::Forget(const std::vector<QueueTrace*>& queues) {
  if (queues.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [handle, session] : sessions_) {
    if (session.queues.empty() || session.queues[0] != queues[0]) continue;
    for (QueueTrace* queue : session.queues) queue->Stop();
    session.queues.clear();
    session.next_queue = 0;
    session.disk.clear();
  }
}

}  // namespace pvdisk::trace
