#include "agent/transport/host_breaker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/log.h"

namespace parity::agent {

namespace {

constexpr int kSlots = 256;  // processes of this user on this host tripping on one server

bool Alive(int32_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

int64_t Now() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// Zero-filled when created: every slot free, no trip. Only lock-free atomics live here, shared
// by the processes that map it; times are CLOCK_MONOTONIC's (std::chrono::steady_clock), one
// clock for every process of the host.
struct HostBreaker::Segment {
  std::atomic<int64_t> moved_ns;  // the last time a rank saw the server move after a trip
  struct Slot {
    std::atomic<int32_t> pid;  // 0: free
    std::atomic<int32_t> unused;
    std::atomic<int64_t> tripped_ns;  // when the process's wait ran out; 0: it re-armed since
  };
  Slot slots[kSlots];
};
static_assert(std::atomic<int32_t>::is_always_lock_free, "shared between processes");
static_assert(std::atomic<int64_t>::is_always_lock_free, "shared between processes");

std::string HostBreaker::SegmentName(const std::string& server) {
  // v1: the segment's layout; another one gets another name.
  return absl::StrFormat("/parity-breaker-v1-%u-%016x", static_cast<unsigned>(::getuid()),
                         Fnv1a(server));
}

std::unique_ptr<HostBreaker> HostBreaker::Open(const std::string& server) {
  const std::string name = SegmentName(server);
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    common::Log(common::LogLevel::kDebug,
                absl::StrCat("shm_open ", name, ": ", std::strerror(errno),
                             "; a stalled server costs each rank of this host its own timeout"));
    return nullptr;
  }
  struct stat st {};
  void* mapped = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && (st.st_size >= static_cast<off_t>(sizeof(Segment)) ||
                                ::ftruncate(fd, sizeof(Segment)) == 0)) {
    mapped = ::mmap(nullptr, sizeof(Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  const int error = errno;
  ::close(fd);
  if (mapped == MAP_FAILED) {
    common::Log(common::LogLevel::kDebug,
                absl::StrCat("mapping ", name, ": ", std::strerror(error),
                             "; a stalled server costs each rank of this host its own timeout"));
    return nullptr;
  }
  return std::unique_ptr<HostBreaker>(new HostBreaker(name, static_cast<Segment*>(mapped)));
}

HostBreaker::~HostBreaker() {
  if (slot_ >= 0) {
    Segment::Slot& s = segment_->slots[slot_];
    s.tripped_ns.store(0);
    int32_t me = static_cast<int32_t>(::getpid());
    s.pid.compare_exchange_strong(me, 0);
  }
  ::munmap(segment_, sizeof(Segment));
  // The name goes with the first session that ends: the ranks still running keep the segment
  // they mapped (they open it once, at their connection), and /dev/shm keeps nothing once the
  // training is over. A process that connects later makes a fresh one.
  ::shm_unlink(name_.c_str());
}

int HostBreaker::Claim() {
  if (slot_ >= 0) return slot_;
  const int32_t me = static_cast<int32_t>(::getpid());
  for (int i = 0; i < kSlots; ++i) {
    Segment::Slot& s = segment_->slots[i];
    int32_t holder = s.pid.load();
    if (holder == me) {  // left by this pid before (an earlier session of this process)
      slot_ = i;
      return slot_;
    }
    if ((holder == 0 || !Alive(holder)) && s.pid.compare_exchange_strong(holder, me)) {
      s.tripped_ns.store(0);
      slot_ = i;
      return slot_;
    }
  }
  return -1;
}

void HostBreaker::SetTripped(bool tripped) {
  if (!tripped) {
    // The server moved: no trip before now holds, this process's or another's.
    const int64_t now = Now();
    int64_t moved = segment_->moved_ns.load();
    while (moved < now && !segment_->moved_ns.compare_exchange_weak(moved, now)) {
    }
    if (slot_ >= 0) segment_->slots[slot_].tripped_ns.store(0);
    return;
  }
  const int slot = Claim();
  if (slot >= 0) segment_->slots[slot].tripped_ns.store(Now());
}

bool HostBreaker::OtherTripped() const {
  const int32_t me = static_cast<int32_t>(::getpid());
  const int64_t moved = segment_->moved_ns.load();
  for (const Segment::Slot& s : segment_->slots) {
    const int32_t pid = s.pid.load();
    if (pid == 0 || pid == me) continue;
    if (s.tripped_ns.load() > moved && Alive(pid)) return true;
  }
  return false;
}

}  // namespace parity::agent
