// The snapshot buffer pool: size classes, reuse, the cache cap and its eviction.
#include "agent/torch/buffer_pool.h"

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace parity::agent {
namespace {

TEST(BufferPoolTest, ClassesAreAtMostAQuarterLargerThanAsked) {
  EXPECT_EQ(BufferPool::ClassOf(1), 4096u);
  EXPECT_EQ(BufferPool::ClassOf(4096), 4096u);
  EXPECT_EQ(BufferPool::ClassOf(4097), 5120u);
  EXPECT_EQ(BufferPool::ClassOf(1 << 20), uint64_t{1} << 20);
  EXPECT_EQ(BufferPool::ClassOf((1 << 20) + 1), uint64_t{5} << 18);
  for (uint64_t n = 4097; n < (uint64_t{1} << 34); n = n * 3 / 2 + 7) {
    const uint64_t c = BufferPool::ClassOf(n);
    EXPECT_GE(c, n);
    EXPECT_LE(c, n + n / 4) << n;
    EXPECT_EQ(BufferPool::ClassOf(c), c) << n;
  }
}

TEST(BufferPoolTest, AGivenBufferServesTheNextRequestOfItsClass) {
  BufferPool pool(uint64_t{1} << 20);
  uint64_t cap = 0;
  void* a = pool.Take(100000, &cap);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(cap, BufferPool::ClassOf(100000));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 1, 100000);  // the whole capacity asked for is writable
  pool.Give(a, cap);
  uint64_t cap2 = 0;
  EXPECT_EQ(pool.Take(100001, &cap2), a);  // same class
  EXPECT_EQ(cap2, cap);
  uint64_t cap3 = 0;
  void* other = pool.Take(200000, &cap3);  // another class: a new buffer
  EXPECT_NE(other, a);
  const BufferPool::Stats s = pool.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.cached_bytes, 0u);
  pool.Give(a, cap2);
  pool.Give(other, cap3);
  EXPECT_EQ(pool.stats().cached_bytes, cap2 + cap3);
}

TEST(BufferPoolTest, TheCacheStaysUnderItsCapByEvictingTheLargest) {
  const uint64_t big = BufferPool::ClassOf(300000), small = BufferPool::ClassOf(50000);
  BufferPool pool(big + 2 * small);
  uint64_t c1 = 0, c2 = 0, c3 = 0, c4 = 0;
  void* b = pool.Take(300000, &c1);
  void* s1 = pool.Take(50000, &c2);
  void* s2 = pool.Take(50000, &c3);
  void* s3 = pool.Take(50000, &c4);
  pool.Give(b, c1);
  pool.Give(s1, c2);
  pool.Give(s2, c3);
  EXPECT_EQ(pool.stats().cached_bytes, big + 2 * small);
  pool.Give(s3, c4);  // no room: the big one goes
  EXPECT_EQ(pool.stats().cached_bytes, 3 * small);
  EXPECT_EQ(pool.stats().freed, 1u);
  uint64_t c = 0;
  void* again = pool.Take(300000, &c);  // a miss now
  EXPECT_EQ(pool.stats().misses, 5u);
  pool.Give(again, c);
  EXPECT_LE(pool.stats().cached_bytes, big + 2 * small);
  // A buffer larger than the whole cap is freed at once.
  BufferPool tiny(8192);
  void* huge = tiny.Take(1 << 20, &c);
  tiny.Give(huge, c);
  EXPECT_EQ(tiny.stats().cached_bytes, 0u);
  // Lowering the cap to 0 frees everything (parity.snapshot_pool_bytes = 0).
  pool.SetMaxCached(0);
  EXPECT_EQ(pool.stats().cached_bytes, 0u);
}

TEST(BufferPoolTest, ManyThreadsTakeAndGiveWithoutSharingABuffer) {
  BufferPool pool(uint64_t{4} << 20);
  std::vector<std::thread> threads;
  std::atomic<int> corrupted{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, &corrupted, t] {
      for (int i = 0; i < 2000; ++i) {
        uint64_t cap = 0;
        const uint64_t n = 20000 + static_cast<uint64_t>((i * 7919 + t) % 5) * 30000;
        auto* p = static_cast<unsigned char*>(pool.Take(n, &cap));
        std::memset(p, t + 1, n);
        for (uint64_t k = 0; k < n; k += 4096) corrupted += p[k] != t + 1;
        pool.Give(p, cap);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_GT(pool.stats().hits, 4000u);
}

}  // namespace
}  // namespace parity::agent
