// The parity.v1.PrecisionChecker service on gRPC's callback API: one reactor per agent stream.
// Reactions validate, reassemble chunks and enqueue; replay runs on the WorkQueue's workers;
// verdicts go back in the order the calls arrived on each stream.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/torch/value_codec.h"
#include "common/transport/tls.h"
#include "common/transport/wire.h"
#include "common/wire/limits.h"
#include "parity/v1/parity.grpc.pb.h"
#include "server/call/call_origin.h"
#include "server/call/call_outcome.h"
#include "server/call/call_sink.h"
#include "server/call/server_call.h"
#include "server/service/blob_store.h"
#include "server/service/byte_budget.h"
#include "server/service/service_options.h"
#include "server/service/stream_context.h"
#include "server/service/work_queue.h"

namespace parity::server {

class ServerMetrics;

using common::kProtocolVersion;

// The Check method is registered raw (ByteBuffer in and out): the reactor reads only the first
// tag of each message, and an ApiCall, which carries the tensors, is parsed by the worker that
// replays it. The gRPC thread that reads the stream then never copies tensor bytes, so reading
// and parsing overlap on different cores (tests/bench/transport_bench measures it).
// Each stream sees the service only as its StreamContext (server/service/stream_context.h).
class CheckService final
    : public v1::PrecisionChecker::WithRawCallbackMethod_Check<v1::PrecisionChecker::Service>,
      private StreamContext {
 public:
  // `sink`, `queue` and `metrics` (may be null) must outlive the service.
  CheckService(ServiceOptions options, CallSink* sink, WorkQueue* queue, ServerMetrics* metrics);

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Check(
      grpc::CallbackServerContext* context) override;

  int active_streams() const { return active_.load(); }
  // Bytes held in chunked tensors awaiting their call, over all streams.
  uint64_t partial_blob_bytes() const { return partial_blobs_.used(); }
  // Kept-blob bytes offered to the open streams (ServerInfo.kept_blob_bytes), all together.
  uint64_t kept_blob_bytes_offered() const { return kept_offered_.used(); }

  // From now on, growing a chunked tensor past `bytes` throws std::bad_alloc, as a real
  // allocation failure would (0 = never). Process-wide.
  static void FailBlobGrowthAboveForTesting(uint64_t bytes);

  // Records the config digest a rank of `run_id` announced; logs a warning the first time a
  // rank of a run announces another digest than the run's first rank (ranks started with
  // different settings check different calls). Thread-safe.
  void NoteConfigDigest(const std::string& run_id, int32_t rank,
                        const std::string& digest) override;

  // An agent's counters (AgentStats, cumulative since the agent started, over all its streams)
  // as last reported on any stream by the agent `agent` (Hello's run_id, hostname, pid and
  // rank); returns the previous report, empty for an agent not seen before. So the metrics count
  // each increase once, whichever stream reports it: after a reconnect the new stream's first
  // report carries the old stream's counts too. Thread-safe.
  v1::AgentStats ExchangeAgentStats(const std::string& agent, const v1::AgentStats& stats) override;

 private:
  // StreamContext, for the streams.
  const ServiceOptions& options() const override { return options_; }
  ServerMetrics* metrics() const override { return metrics_; }
  ByteBudget* partial_blobs() override { return &partial_blobs_; }
  ByteBudget* kept_offered() override { return &kept_offered_; }
  bool Enqueue(WorkItem item, std::function<void()> on_admitted) override;
  CallSink& sink() const override { return *sink_; }
  void StreamEnded(const CallOrigin* origin, bool counted) override;
  // Mutual TLS: why the stream's client certificate is refused ("" when it is not), counted by
  // cause and logged naming the peer, once a minute per peer host and cause.
  std::string RefusedClient(grpc::CallbackServerContext* context);

  const ServiceOptions options_;
  CallSink* const sink_;
  WorkQueue* const queue_;
  ServerMetrics* const metrics_;
  std::atomic<int> active_{0};
  std::atomic<uint64_t> session_counter_{0};
  ByteBudget partial_blobs_;  // parity.max_partial_blob_bytes
  // Kept-blob bytes offered to streams (parity.max_kept_blob_bytes): a new stream is offered
  // the per-stream cap within what the total leaves, reserved until the stream ends.
  ByteBudget kept_offered_;
  struct RunDigest {
    std::string digest;
    int32_t rank = 0;
    bool warned = false;
  };
  absl::Mutex digests_mu_;
  std::map<std::string, RunDigest> digests_ ABSL_GUARDED_BY(digests_mu_);  // by run id
  absl::Mutex agent_stats_mu_;
  std::map<std::string, v1::AgentStats> agent_stats_ ABSL_GUARDED_BY(agent_stats_mu_);
  absl::Mutex refusals_mu_;
  // "host cause" -> when it was last logged (steady clock): at most one line a minute each.
  std::map<std::string, std::chrono::steady_clock::time_point> refusals_logged_
      ABSL_GUARDED_BY(refusals_mu_);
};

}  // namespace parity::server
