// FuzzInput: reads a fuzzer's input front to back as little-endian fields,
// so that seed inputs are easy to write by hand or from a script
// (make_seeds.py). Past the end every field reads as zero, so that any input,
// however short, is a complete script.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pvdisk::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return at_ >= size_; }

  uint8_t U8() { return static_cast<uint8_t>(Read(1)); }
  uint16_t U16() { return static_cast<uint16_t>(Read(2)); }
  uint32_t U32() { return static_cast<uint32_t>(Read(4)); }
  uint64_t U64() { return Read(8); }

  // Copies the next `n` bytes to `to`, zero-filling past the end. `to` may
  // be null when `n` is 0 (an empty vector's data()).
  void Bytes(void* to, size_t n) {
    if (n == 0) return;
    size_t have = at_ < size_ ? size_ - at_ : 0;
    size_t take = n < have ? n : have;
    if (take > 0) std::memcpy(to, data_ + at_, take);
    std::memset(static_cast<uint8_t*>(to) + take, 0, n - take);
    at_ += take;
  }

 private:
  uint64_t Read(int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes && at_ < size_; ++i) {
      value |= uint64_t{data_[at_++]} << (8 * i);
    }
    return value;
  }

  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

// A property the code under test broke: say which and abort, which libFuzzer
// reports as a finding (with the input saved as crash-*).
#define FUZZ_CHECK(condition, what)                                        \
  do {                                                                     \
    if (!(condition)) {                                                    \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", __FILE__, \
                   __LINE__, #condition, what);                            \
      std::abort();                                                        \
    }                                                                      \
  } while (0)

}  // namespace pvdisk::fuzz
