#include "agent/torch/buffer_pool.h"

#include <cstdlib>
#include <iterator>

namespace parity::agent {

BufferPool::~BufferPool() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, buffers] : free_) {
    for (void* b : buffers) std::free(b);
  }
}

uint64_t BufferPool::ClassOf(uint64_t bytes) {
  constexpr uint64_t kMin = 4096;
  if (bytes <= kMin) return kMin;
  int top = 63;
  while (((bytes >> top) & 1) == 0) --top;
  const uint64_t step = uint64_t{1} << (top - 2);  // four classes per power of two
  return (bytes + step - 1) / step * step;
}

void* BufferPool::Take(uint64_t bytes, uint64_t* capacity) {
  const uint64_t size = ClassOf(bytes);
  *capacity = size;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* b = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= size;
      ++stats_.hits;
      return b;
    }
    ++stats_.misses;
  }
  void* b = nullptr;
  if (posix_memalign(&b, 64, size) != 0) return nullptr;
  return b;
}

void BufferPool::Give(void* buffer, uint64_t capacity) {
  if (buffer == nullptr) return;
  std::vector<void*> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (capacity > max_cached_) {
      ++stats_.freed;
      evicted.push_back(buffer);
    } else {
      // Room by evicting the largest cached buffers: the sizes a training asks for change
      // (another model, another batch), and a cache full of stale sizes would serve nothing.
      EvictDownTo(max_cached_ - capacity, &evicted);
      free_[capacity].push_back(buffer);
      stats_.cached_bytes += capacity;
    }
  }
  for (void* b : evicted) std::free(b);  // outside the lock
}

void BufferPool::SetMaxCached(uint64_t max_cached_bytes) {
  std::vector<void*> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    max_cached_ = max_cached_bytes;
    EvictDownTo(max_cached_, &evicted);
  }
  for (void* b : evicted) std::free(b);
}

void BufferPool::EvictDownTo(uint64_t target, std::vector<void*>* evicted) {
  while (stats_.cached_bytes > target && !free_.empty()) {
    auto largest = std::prev(free_.end());
    if (largest->second.empty()) {
      free_.erase(largest);
      continue;
    }
    evicted->push_back(largest->second.back());
    largest->second.pop_back();
    stats_.cached_bytes -= largest->first;
    ++stats_.freed;
  }
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace parity::agent
