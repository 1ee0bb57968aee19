// GrantMapper: how the backend reaches the frontend's data pages, the
// analogue of Xen's grant mapping.
//
// - Persistent grants (`--persistent on`): the backend mapped the whole data
//   area once at start; a page is its address, nothing to do per request.
// - Per-request grants (`--persistent off`): the backend maps the pages of a
//   request (mmap of the shared region at the pages' offset) when it takes
//   it, and unmaps them when it answers, as blkback maps and unmaps grants
//   without feature-persistent. Counted in grant_maps / grant_unmaps.
//
// Used by one backend thread.
#pragma once

#include <cstdint>
#include <memory>

#include "stats/queue_stats.h"
#include "transport/lent_memory.h"
#include "transport/shared_region.h"

namespace pvdisk::transport {

// What MapPages() set up, for UnmapPages().
struct PageMapping {
  uint8_t* address = nullptr;
  uint32_t pages = 0;
  bool owned = false;  // a mapping of its own that must be unmapped
};

class GrantMapper {
 public:
  virtual ~GrantMapper() = default;
  // Makes pages [first, first + count) of the data area addressable.
  // Returns false (and maps nothing) if the system refuses.
  virtual bool MapPages(uint32_t first, uint32_t count, PageMapping* out) = 0;
  virtual void UnmapPages(const PageMapping& mapping) = 0;
  // Whether every page always has the same address (persistent), so that the
  // whole data area can be registered with the engine once.
  virtual bool persistent() const = 0;
};

// Persistent grants over `data` (the backend's mapping of the data area,
// `data_pages` pages), followed by the pages of `lent` (lent_memory.h): page
// LentFirstPage(data_pages) + i is lent page i. A run that is not wholly in
// one of the two is refused. Without lent memory `data_pages` may stay
// unbounded: the device ring has checked every page against its limits already.
std::unique_ptr<GrantMapper> NewPersistentGrants(
    uint8_t* data, uint32_t data_pages = UINT32_MAX, LentMemory lent = {});

// Per-request grants: maps from `region` starting `data_offset` bytes in
// (a multiple of 4096), counting in `stats`.
std::unique_ptr<GrantMapper> NewPerRequestGrants(const SharedRegion* region,
                                                 size_t data_offset,
                                                 stats::QueueStats* stats);

}  // namespace pvdisk::transport
