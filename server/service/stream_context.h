// What one agent stream needs from the service around it, and nothing more: the stream session
// (server/service/stream_session.h) and its gRPC adapter (stream_reactor.h) reach the service
// only through this interface, never through its fields. CheckService implements it; the tests
// of the session implement it with a recording fake (no gRPC, no server).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "parity/v1/parity.pb.h"
#include "server/service/work_queue.h"

namespace parity::server {

class BlobStore;
class ByteBudget;
class ServerMetrics;
class CallSink;
struct CallOutcome;
struct CallOrigin;
struct ServerCall;
struct ServiceOptions;

class StreamContext {
 public:
  virtual ~StreamContext() = default;

  virtual const ServiceOptions& options() const = 0;
  // May be null (no metrics). Thread-safe.
  virtual ServerMetrics* metrics() const = 0;
  // Bytes of chunked tensors awaiting their call over all streams, and of kept blobs offered to
  // them (parity.max_partial_blob_bytes, parity.max_kept_blob_bytes).
  virtual ByteBudget* partial_blobs() = 0;
  virtual ByteBudget* kept_offered() = 0;

  // A Hello was accepted: the run's config digest, checked against its other ranks'.
  virtual void NoteConfigDigest(const std::string& run_id, int32_t rank,
                                const std::string& digest) = 0;
  // The agent `agent` (Hello's run_id, hostname, pid, rank) reported its cumulative counters;
  // returns its previous report, empty for the first. Thread-safe.
  virtual v1::AgentStats ExchangeAgentStats(const std::string& agent,
                                            const v1::AgentStats& stats) = 0;

  // Queues a call's check for a worker: true when queued; false when the queue is full and the
  // item is parked, `on_admitted` then runs (on a worker) once it is queued (WorkQueue).
  virtual bool Enqueue(WorkItem item, std::function<void()> on_admitted) = 0;
  // Where a worker hands each call (the service's CallSink: the check pipeline).
  virtual CallSink& sink() const = 0;

  // The stream ended, after every call it queued was handled: `origin` is its Hello's, or null
  // for a stream that never had one; `counted`: it was counted among the open streams (not
  // refused at once). On a gRPC thread.
  virtual void StreamEnded(const CallOrigin* origin, bool counted) = 0;
};

}  // namespace parity::server
