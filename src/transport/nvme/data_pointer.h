// A command's data pointer: PRP entries (prp.cc) or SGL descriptors
// (sgl.cc). The driver encodes a request's data segments into the command
// and the request id's table pages; the device decodes a command's pointer,
// checking it as a stranger's, back into the shared segment form
// (transport/ring_request.h) that every protocol's device ring produces.
//
// pvdisk's device is stricter than NVMe where its backend needs it: data
// addresses and lengths are whole 512-byte sectors, and a request's pages
// are at most DeviceLimits::max_segments (its MDTS).
#pragma once

#include <cstdint>
#include <vector>

#include "transport/data_area.h"
#include "transport/nvme/format.h"
#include "transport/ring_request.h"

namespace pvdisk::transport::nvme {

// Driver side. `data_memory` is the driver's mapping of the data area;
// `table_pages` the request id's pages (format.h: TablePagesPerRequest).
//
// PRP: PRP1 is the first segment's address; PRP2 the second page, or with
// more than two a PRP list in the table pages (kPrpPerPage - 1 entries and
// a link to the next page when more follow). REQUIRES: the segments are
// gapless (every one but the first starts at its page's start, every one
// but the last ends at its page's end).
void EncodePrp(const DataSegment* segments, uint32_t count,
               const uint32_t* table_pages, uint8_t* data_memory,
               Command* command);
// SGL: consecutive segments joined into data blocks; one block is SGL1
// itself, more go into segments of at most kSglPerPage descriptors in the
// table pages, each full one ending with a link to the next.
void EncodeSgl(const DataSegment* segments, uint32_t count,
               const uint32_t* table_pages, uint8_t* data_memory,
               Command* command);

// Device side: checks the pointer of `command` for `bytes` bytes of data
// and appends the pages it names to `out` (whole sectors in each). Returns
// kScSuccess or the status that answers the command.
class DataPointerDecoder {
 public:
  // `area` outlives the decoder.
  DataPointerDecoder(DataArea* area, uint32_t max_segments)
      : area_(area), max_segments_(max_segments) {}

  uint16_t DecodePrp(const Command& command, uint64_t bytes,
                     std::vector<DataSegment>* out);
  uint16_t DecodeSgl(const Command& command, uint64_t bytes,
                     std::vector<DataSegment>* out);

 private:
  // Appends [addr, addr + len) (whole sectors) page by page.
  uint16_t Append(uint64_t addr, uint64_t len, std::vector<DataSegment>* out);
  // Appends one PRP entry's page: `addr` must start a page, `len` (whole
  // sectors, at most a page) is the data in it. Append's checks and result
  // for that case, without its walk over pages (a PRP list's hot loop).
  uint16_t AppendPage(uint64_t addr, uint64_t len,
                      std::vector<DataSegment>* out);
  uint16_t DataBlock(const SglDescriptor& d, uint64_t bytes, uint64_t* total,
                     std::vector<DataSegment>* out);

  DataArea* area_;
  uint32_t max_segments_;
  std::vector<uint64_t> prp_list_;          // scratch: one list page
  std::vector<uint32_t> prp_list_pages_;    // list pages seen (loops)
  std::vector<SglDescriptor> sgl_segment_;  // scratch: one segment
};

}  // namespace pvdisk::transport::nvme
