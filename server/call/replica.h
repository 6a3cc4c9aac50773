// Replicas: a rank's digests of tensors that every rank of its process group must hold bit for
// bit (a data-parallel all-reduce's gradients, an optimizer step's parameters, a collective's
// outputs), and the comparison of a group's reports with each other. The server's own types,
// made from the wire at the edge (server/call/replica_wire.h); torch- and protobuf-free.
// docs/replicas.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/compare/check_status.h"

namespace parity::server {

// One rank's report (parity.v1.ReplicaReport, with its stream's run and rank).
struct ReplicaReport {
  std::string run_id;  // Hello.run_id
  int32_t rank = 0;    // Hello.rank: one of `group`
  std::vector<int32_t> group;
  int64_t step = 0;
  uint64_t sequence = 0;
  std::string kind;  // "gradients", "parameters", "collective"
  std::string op;
  std::string algorithm;  // "crc32c", "poly64"
  struct Digest {
    std::string name;
    uint64_t digest = 0;
    uint64_t bytes = 0;
  };
  std::vector<Digest> digests;
};

// What comparing a group's reports found.
struct ReplicaOutcome {
  std::string run_id;
  std::vector<int32_t> group;
  int64_t step = 0;
  uint64_t sequence = 0;
  std::string kind, op;
  // kPass: every rank that reported agrees on every digest; kError: a digest differs; kSkip:
  // fewer than two ranks reported.
  CheckStatus status = CheckStatus::kPass;
  struct Mismatch {
    std::string name;
    std::vector<int32_t> agreeing;  // the majority's ranks (empty without a majority)
    std::vector<int32_t> differing;
  };
  std::vector<Mismatch> mismatches;  // the first kMaxReplicaMismatches
  uint32_t mismatch_count = 0;       // all of them
  std::vector<int32_t> reported;     // the ranks whose report came, ascending
  std::vector<int32_t> missing;      // the group's others: counted, not blamed
  std::size_t digests = 0;           // digests compared (the largest report's count)
  std::string message;
};

inline constexpr std::size_t kMaxReplicaMismatches = 64;

// Where a comparison's outcome goes back to one reporting rank: its stream, while it is open.
// Deliver is called from the comparing thread; it must not block, and does nothing once the
// stream has ended.
class ReplicaMailbox {
 public:
  virtual ~ReplicaMailbox() = default;
  virtual void Deliver(const ReplicaOutcome& outcome) = 0;
};

// Takes each rank's reports and compares each group's once complete (or once the wait runs out).
class ReplicaSink {
 public:
  virtual ~ReplicaSink() = default;
  // Thread-safe; never blocks on other ranks.
  virtual void Report(ReplicaReport report, std::shared_ptr<ReplicaMailbox> mailbox) = 0;
};

}  // namespace parity::server
