// Proving a host tensor unchanged by a call (issue 68: the read-only check, the snapshot cache):
// each mechanism's cost per megabyte, side by side in one run, as a ratio to what the agent does
// today (a memcmp of the tensor at exit against its copy at entry), and whether each caught a
// one-byte write (a mechanism that misses it is not a candidate, however cheap).
//   memcmp          the exit's compare, reading the tensor and its copy (2 N bytes)
//   copy            the entry's copy itself (memcpy: paid anyway, the snapshot sent)
//   crc32c          the CPU's CRC-32C of the tensor at exit (N bytes), against the CRC of its
//                   copy taken at entry (off the training thread, on the sender's)
//   soft-dirty      Linux's soft-dirty bits: clear them at entry (/proc/self/clear_refs "4",
//                   the whole process's page tables), read the tensor's pages' bits at exit
//                   (/proc/self/pagemap, 8 bytes a page); per call, for this process's size
//   write-protect   mprotect the tensor's pages read-only at entry and back at exit (a write
//                   between faults: the training's own writes too, so a handler is needed)
//   change_detect_bench [--quick]
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/wire/crc32c.h"
#include "tests/bench/best_seconds.h"

namespace {

using parity::bench::BestSeconds;

using Clock = std::chrono::steady_clock;

constexpr std::size_t kPage = 4096;
constexpr uint64_t kSoftDirtyBit = uint64_t{1} << 55;

// A page-aligned buffer (mprotect and pagemap work on pages).
struct Pages {
  explicit Pages(std::size_t n) : bytes(n) {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
  }
  ~Pages() {
    if (data != nullptr) munmap(data, bytes);
  }
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;
  std::string_view view() const { return {reinterpret_cast<const char*>(data), bytes}; }
  unsigned char* data;
  std::size_t bytes;
};

bool ClearSoftDirty() {
  const int fd = open("/proc/self/clear_refs", O_WRONLY);
  if (fd < 0) return false;
  const bool ok = write(fd, "4", 1) == 1;
  close(fd);
  return ok;
}

// Whether any page of [data, data + bytes) is soft-dirty; -1 when pagemap cannot be read.
int AnySoftDirty(int pagemap, const unsigned char* data, std::size_t bytes,
                 std::vector<uint64_t>& entries) {
  const std::size_t pages = bytes / kPage;
  entries.resize(pages);
  const off_t offset = static_cast<off_t>(reinterpret_cast<uintptr_t>(data) / kPage * 8);
  const ssize_t want = static_cast<ssize_t>(pages * 8);
  if (pread(pagemap, entries.data(), static_cast<std::size_t>(want), offset) != want) return -1;
  for (uint64_t e : entries) {
    if (e & kSoftDirtyBit) return 1;
  }
  return 0;
}

void Row(const char* name, double seconds, std::size_t bytes, double baseline, const char* caught) {
  const double us_per_mb = seconds * 1e6 / (static_cast<double>(bytes) / (1 << 20));
  std::printf("  %-14s %10.1f %9.2f   %s\n", name, us_per_mb, seconds / baseline, caught);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const std::vector<std::size_t> sizes =
      quick ? std::vector<std::size_t>{1u << 20}
            : std::vector<std::size_t>{64u << 10, 1u << 20, 16u << 20, 128u << 20};
  const int reps = quick ? 2 : 9;
  // The process's own size drives clear_refs' cost: a training holds gigabytes. Here: what the
  // buffers below hold, plus this much more touched memory (say so in the header).
  const std::size_t ballast_bytes = quick ? (16u << 20) : (1u << 30);
  Pages ballast(ballast_bytes);
  if (ballast.data != nullptr) std::memset(ballast.data, 1, ballast_bytes);
  std::printf(
      "change_detect_bench: proving a tensor unchanged between a call's entry and exit, best of "
      "%d; the process holds %zu MiB more (clear_refs walks it all); crc32c uses the CPU's "
      "instruction: %s\n",
      reps, ballast_bytes >> 20, parity::common::Crc32cUsesCpuInstruction() ? "yes" : "no");
  const int pagemap = open("/proc/self/pagemap", O_RDONLY);
  volatile uint64_t sink = 0;
  int missed = 0;
  for (std::size_t bytes : sizes) {
    Pages live(bytes), copy(bytes);
    if (live.data == nullptr || copy.data == nullptr) {
      std::printf("cannot map %zu bytes\n", bytes);
      return 1;
    }
    for (std::size_t i = 0; i < bytes; ++i) live.data[i] = static_cast<unsigned char>(i * 131u);
    std::memcpy(copy.data, live.data, bytes);
    std::printf("%zu KiB:\n  %-14s %10s %9s   %s\n", bytes >> 10, "mechanism", "us/MiB", "x memcmp",
                "a 1-byte write");
    const double memcmp_s = BestSeconds(reps, [&] {
      sink = sink + static_cast<uint64_t>(std::memcmp(live.data, copy.data, bytes) != 0);
    });
    // Each mechanism's exactness, on one byte written in the middle of the last page but one.
    const std::size_t at = bytes - kPage - kPage / 2;
    auto poke = [&] { live.data[at] = static_cast<unsigned char>(live.data[at] ^ 0x40); };
    auto unpoke = poke;  // the same flip undoes it
    poke();
    const bool memcmp_caught = std::memcmp(live.data, copy.data, bytes) != 0;
    unpoke();
    Row("memcmp", memcmp_s, bytes, memcmp_s, memcmp_caught ? "caught" : "MISSED");
    missed += memcmp_caught ? 0 : 1;

    const double copy_s = BestSeconds(reps, [&] {
      std::memcpy(copy.data, live.data, bytes);
      sink = sink + copy.data[0];
    });
    Row("copy (entry)", copy_s, bytes, memcmp_s, "(the snapshot)");

    const uint32_t entry_crc = parity::common::Crc32c(copy.view());
    const double crc_s = BestSeconds(
        reps, [&] { sink = sink + (parity::common::Crc32c(live.view()) != entry_crc); });
    poke();
    const bool crc_caught = parity::common::Crc32c(live.view()) != entry_crc;
    unpoke();
    Row("crc32c (exit)", crc_s, bytes, memcmp_s, crc_caught ? "caught" : "MISSED");
    missed += crc_caught ? 0 : 1;

    std::vector<uint64_t> entries;
    // Whether this kernel keeps the bits at all (CONFIG_MEM_SOFT_DIRTY): a cleared page written
    // must read dirty. Without them clear_refs "4" is accepted and every page reads clean.
    bool soft_dirty = pagemap >= 0 && ClearSoftDirty() &&
                      AnySoftDirty(pagemap, ballast.data, kPage, entries) == 0;
    if (soft_dirty && ballast.data != nullptr) {
      ballast.data[0] = static_cast<unsigned char>(ballast.data[0] + 1);
      soft_dirty = AnySoftDirty(pagemap, ballast.data, kPage, entries) == 1;
    }
    if (soft_dirty && ClearSoftDirty() && AnySoftDirty(pagemap, live.data, bytes, entries) == 0) {
      const double clear_s = BestSeconds(reps, [&] { sink = sink + ClearSoftDirty(); });
      const double read_s = BestSeconds(reps, [&] {
        sink = sink + static_cast<uint64_t>(AnySoftDirty(pagemap, live.data, bytes, entries));
      });
      ClearSoftDirty();
      poke();
      const bool dirty_caught = AnySoftDirty(pagemap, live.data, bytes, entries) == 1;
      unpoke();
      Row("soft-dirty", clear_s + read_s, bytes, memcmp_s, dirty_caught ? "caught" : "MISSED");
      std::printf("  %-14s %10.1f us a call (clear_refs) + %.1f us/MiB (pagemap)\n", "",
                  clear_s * 1e6, read_s * 1e6 / (static_cast<double>(bytes) / (1 << 20)));
      missed += dirty_caught ? 0 : 1;
    } else {
      std::printf(
          "  %-14s unavailable here (no soft-dirty bits: CONFIG_MEM_SOFT_DIRTY, or "
          "/proc/self/pagemap unreadable): a page written after clear_refs reads clean\n",
          "soft-dirty");
      if (ClearSoftDirty()) {  // what clearing them would cost a call, all the same
        const double clear_s = BestSeconds(reps, [&] { sink = sink + ClearSoftDirty(); });
        std::printf("  %-14s %10.1f us a call for clear_refs alone\n", "", clear_s * 1e6);
      }
    }

    const double protect_s = BestSeconds(reps, [&] {
      sink = sink + static_cast<uint64_t>(mprotect(live.data, bytes, PROT_READ));
      sink = sink + static_cast<uint64_t>(mprotect(live.data, bytes, PROT_READ | PROT_WRITE));
    });
    Row("write-protect", protect_s, bytes, memcmp_s, "(faults on any write: the training's too)");
  }
  if (pagemap >= 0) close(pagemap);
  std::printf("mechanisms that missed a write: %d\n", missed);
  return missed == 0 ? 0 : 1;
}
