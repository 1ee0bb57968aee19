// Fifo: a first-in, first-out queue in one circular buffer that keeps its
// capacity, for queues on a request's path.
//
// std::deque allocates a 512-byte node each time its back crosses into a new
// one and frees it when its front leaves it, so a queue that every request
// passes through costs an allocation and a free every few requests. A Fifo
// grows (doubling) to the most it has ever held and then allocates nothing.
//
// Elements are indexed from the front: (*this)[0] is front(), [size() - 1]
// is back(). pop_front() moves the element out and destroys it, so that what
// it owned is released at once.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace pvdisk {

template <typename T>
class Fifo {
 public:
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }

  T& operator[](size_t i) { return slots_[(head_ + i) & mask()]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & mask()]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[count_ - 1]; }

  void push_back(T value) {
    if (count_ == slots_.size()) Grow();
    slots_[(head_ + count_) & mask()] = std::move(value);
    ++count_;
  }
  // REQUIRES: !empty().
  void pop_front() {
    [[maybe_unused]] T released = std::move(slots_[head_]);  // freed here
    head_ = (head_ + 1) & mask();
    --count_;
  }
  void clear() {
    while (!empty()) pop_front();
  }

 private:
  size_t mask() const { return slots_.size() - 1; }
  // Doubles the buffer (a power of two, at least 8), front first.
  void Grow() {
    std::vector<T> bigger(slots_.empty() ? 8 : slots_.size() * 2);
    for (size_t i = 0; i < count_; ++i) bigger[i] = std::move((*this)[i]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t count_ = 0;
};

}  // namespace pvdisk
