// The agent's counters as its C++ API reports them (parity::agent::GetCounters in
// parity/agent.h). A bridge header: the torch half returns them, the transport half counts them
// (agent/transport/counters.h); neither half's own headers are included across.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace parity::agent {

// Once the session has ended, captured = verdicts + (sum of dropped) + lost_in_flight.
struct Counters {
  uint64_t captured = 0;    // top-level calls that passed the filters
  uint64_t sent = 0;        // calls written to the server
  uint64_t sent_bytes = 0;  // serialized bytes written
  // Tensor bytes not sent because the server kept equal bytes from an earlier call
  // (parity.reuse_bytes): named by blob id instead.
  uint64_t reused_bytes = 0;
  // Calls never written, by reason: queue_full, disconnected, stopped (still queued when the
  // session ended), communication (c10d ops, never copied). Every reason is present.
  std::map<std::string, uint64_t> dropped;
  uint64_t lost_in_flight = 0;  // written to a stream that ended before their verdicts
  uint64_t unencodable = 0;     // sent without data (a value the codec cannot encode): SKIP
  uint64_t sampled_out = 0;     // skipped by the per-signature budget
  uint64_t reconnects = 0;
  uint64_t verdicts = 0;
  uint64_t pass = 0, warning = 0, error = 0, skip = 0, rejected = 0;
  uint64_t unreadable = 0;  // messages from the server that did not parse (ignored)
  uint64_t queue_depth = 0;
  // Where the agent's time went (docs/performance.md): the training thread's time inside the
  // snapshot copies of inputs and outputs (wall clock, read around each copy), and the sender
  // thread's CPU time encoding calls and serializing messages. TLS and gRPC run on gRPC's own
  // threads and are not in these.
  double snapshot_seconds = 0, encode_cpu_seconds = 0, serialize_cpu_seconds = 0;
  // Training threads' time waiting for room in the queue (policy block): what checking every
  // call cost the training when the server fell behind.
  double blocked_seconds = 0;
  // torch.compile regions that ran (forward, backward) and the calls captured inside them: only
  // the aten operators inductor left to the dispatcher; its fused kernels are not seen.
  uint64_t compiled_forward = 0, compiled_backward = 0, compiled_calls = 0;
  // Replica reports (docs/replicas.md): sent, their ReplicaVerdicts by status (error: a rank of
  // the group holds other bytes than the others), and those never sent (the queue of posted
  // messages full, or the session ended before a connection).
  uint64_t replica_reports = 0, replica_pass = 0, replica_error = 0, replica_skip = 0;
  uint64_t replica_unsent = 0;
  int64_t step = 0;
  bool connected = false;
};

}  // namespace parity::agent
