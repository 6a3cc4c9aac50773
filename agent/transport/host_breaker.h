// What the ranks on one host share about the server they stream to: which of them found it
// stalled (a block wait of parity.block_timeout_ms ran out) and has not seen it move since.
// Ranks meet in collectives, so while one waits out its timeout the others wait for it there;
// without this each rank's breaker tripped on its own, one after the other, and a frozen server
// cost the training one timeout per rank (issue 65: 4 ranks, two 10 s stalls back to back).
// With it, a rank about to wait for room (or waiting) sheds at once once another live process
// of this user on this host has tripped on the same server: one timeout per congestion.
//
// The state is a small POSIX shared-memory segment, /dev/shm/parity-breaker-v1-<uid>-<hash of the
// server's address>: one slot per process that tripped (its pid, and when), and when a rank last
// saw the server move again, read without locks. A trip counts until any rank of the host sees
// the server move (its queue drained, or the server took its share of calls since): a rank that
// tripped and then went quiet holds no one back. A slot whose process has died counts for nothing
// and is taken again. The name is removed when the first of its sessions ends (the others keep
// what they mapped). Where shared memory is unavailable, each rank trips on its own, as before.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace parity::agent {

class HostBreaker {
 public:
  // The segment for `server` (the stream's peer, "ipv4:10.0.0.5:59208"), created on first use;
  // null when shared memory cannot be used (the reason is logged at debug level).
  static std::unique_ptr<HostBreaker> Open(const std::string& server);
  ~HostBreaker();  // this process's slot is cleared
  HostBreaker(const HostBreaker&) = delete;
  HostBreaker& operator=(const HostBreaker&) = delete;

  // This process's own wait for room ran out (true), or it saw the server move again (false:
  // every trip made before now is over, another process's too).
  void SetTripped(bool tripped);
  // Whether another live process found this server stalled, and no rank has seen it move since.
  bool OtherTripped() const;
  const std::string& name() const { return name_; }  // the segment's name ("/parity-breaker-...")

  // The segment's name for `server`, for this user.
  static std::string SegmentName(const std::string& server);

 private:
  struct Segment;
  HostBreaker(std::string name, Segment* segment) : name_(std::move(name)), segment_(segment) {}
  int Claim();  // this process's slot, taken on its first trip; -1 when all are in use

  const std::string name_;
  Segment* const segment_;
  int slot_ = -1;
};

}  // namespace parity::agent
