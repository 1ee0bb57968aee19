// The record format of Linux's block layer tracer (blktrace), as blkparse
// and btt read it: a stream of fixed 48-byte records in the recording
// machine's byte order, each optionally followed by `pdu_len` bytes, one
// file per CPU (NAME.blktrace.CPU). Written from the kernel's description of
// the format (include/uapi/linux/blktrace_api.h); these definitions are
// pvdisk's own.
#pragma once

#include <cstdint>

namespace pvdisk::trace::blk {

inline constexpr uint32_t kMagic = 0x65617400;  // "eat" << 8
inline constexpr uint32_t kVersion = 0x07;

// Categories: the high 16 bits of `action` (kCategoryShift).
inline constexpr uint32_t kCategoryShift = 16;
enum Category : uint32_t {
  kCatRead = 1u << 0,
  kCatWrite = 1u << 1,
  kCatFlush = 1u << 2,
  kCatSync = 1u << 3,
  kCatQueue = 1u << 4,
  kCatIssue = 1u << 6,
  kCatComplete = 1u << 7,
  kCatFs = 1u << 8,
  kCatNotify = 1u << 10,
  kCatDiscard = 1u << 13,
};

// Action codes: the low 16 bits of `action`.
enum Code : uint32_t {
  kQueue = 1,
  kBackMerge = 2,
  kFrontMerge = 3,
  kGetRequest = 4,
  kIssue = 7,
  kComplete = 8,
  kInsert = 12,
};

// Notes (category kCatNotify): a process name (pdu: its 16-byte comm) and a
// free-text message (pdu: the text).
enum Note : uint32_t {
  kNoteProcess = 0,
  kNoteMessage = 2,
};

inline constexpr uint32_t Action(uint32_t categories, uint32_t code) {
  return (categories << kCategoryShift) | code;
}

// A device number as the kernel's tracer records it (20 minor bits).
inline constexpr uint32_t Device(uint32_t major, uint32_t minor) {
  return (major << 20) | minor;
}

struct Record {
  uint32_t magic = kMagic | kVersion;
  uint32_t sequence = 0;  // per CPU file, from 1
  uint64_t time = 0;      // ns
  uint64_t sector = 0;
  uint32_t bytes = 0;
  uint32_t action = 0;
  uint32_t pid = 0;
  uint32_t device = 0;
  uint32_t cpu = 0;
  uint16_t error = 0;
  uint16_t pdu_len = 0;
};
static_assert(sizeof(Record) == 48, "blktrace's record is 48 bytes");

}  // namespace pvdisk::trace::blk
