// Where a process group's replica reports go when the agent has several servers
// (docs/replicas.md#several-servers). Each rank streams its calls to its own server (rank mod
// n), so the ranks of one group would report to different servers and never meet. Instead every
// report of a group goes to the server its route picks, route = a hash of the run and the
// group's ranks (ReplicaRoute), the same number on every rank of the group: route mod n over
// the sorted address list, failing over in one order shared by the group's ranks. Each server
// used that way gets a stream of its own from this process (Hello.replicas_only: reports only,
// no stats, no rank_list), opened at its first report: at most one per server.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/transport/sender.h"

namespace parity::agent {

// The route of a group's reports: FNV-1a (64 bits) over the run id, a zero byte, and the group's
// ranks as 4-byte little-endian words. Every rank of the group computes the same.
uint64_t ReplicaRoute(const std::string& run_id, const std::vector<int32_t>& group);

class ReplicaRoutes {
 public:
  // `options`: the call stream's; each route's sender is a copy that streams reports only, to the
  // servers in the route's order. `step`: the step its goodbye carries.
  ReplicaRoutes(SenderOptions options, std::function<int64_t()> step);
  ~ReplicaRoutes();  // Close()

  // Queues `message` on the stream to server `index` (of the sorted list) and its fail-over
  // order, made and started at its first report. False when that stream's posted messages are
  // full (kMaxPostedMessages) or the routes are closed.
  bool Post(std::size_t index, std::shared_ptr<const v1::AgentMessage> message);
  // Waits until every route's reports are written and answered, at most `timeout` in all.
  bool Flush(std::chrono::milliseconds timeout);
  // Flushes and closes every route's stream (at most flush_timeout_ms each). Idempotent.
  void Close();
  std::size_t size() const;

 private:
  struct Route {
    AgentCounters counters;  // its own: its link's state is not the call stream's
    std::unique_ptr<Sender> sender;
  };
  const SenderOptions options_;
  const std::function<int64_t()> step_;
  mutable absl::Mutex mu_;
  std::map<std::size_t, std::unique_ptr<Route>> routes_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace parity::agent
