// One agent's Check stream as a protocol, apart from gRPC: the messages it reads, the one state
// it is in, the calls it hands on and the worker step that checks each. The reactor
// (server/service/stream_reactor.h) is a thin adapter that starts gRPC's reads, writes and
// finish; this class decides what a message means. Tested alone with a fake context and output
// (tests/server/service/stream_session_test.cc): no server, no channel.
//
// States, in order (a stream never goes back):
//   kAwaitingHello  nothing but a Hello is accepted (any other message ends the stream)
//   kStreaming      calls, chunks, releases, stats and Goodbye are accepted
//   kDraining       nothing more is read (the agent half-closed, a message broke a rule, a
//                   worker failed): the calls already queued are checked and answered
//   kFinished       the stream's status went out; the session is done
// OnMessage runs on the reading side (one reaction at a time); EndReading and Finish may be
// called from any thread that holds the adapter's lock, so the state is atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "parity/v1/parity.pb.h"
#include "server/call/call_origin.h"
#include "server/call/replica.h"
#include "server/service/blob_assembler.h"
#include "server/service/message_bytes.h"
#include "server/service/stream_context.h"

namespace parity::server {

enum class StreamState { kAwaitingHello, kStreaming, kDraining, kFinished };
absl::string_view StreamStateName(StreamState state);  // "awaiting hello", "streaming", ...

// One call read from the stream, to be checked by a worker.
struct CallWork {
  uint64_t message = 0;  // the stream's message (0-based) that carried it, for errors
  // `raw` (parsed by the worker) or `call` (parsed by the reaction, when it came as an item of
  // a parsed message).
  std::shared_ptr<MessageBytes> raw;
  std::shared_ptr<v1::ApiCall> call;
  std::shared_ptr<BlobStore> blobs;  // what the call may name
  uint64_t bytes = 0;                // its message's and its blobs' bytes (the queue's budget)
};

// What the session hands to the stream's writing side (the reactor).
class StreamOutput {
 public:
  virtual ~StreamOutput() = default;
  // The answer to an accepted Hello, the stream's first message out. `batch_verdicts`: the agent
  // takes VerdictBatch. `who` names the agent in logs ("rank 3").
  virtual void Answer(MessageBytes message, bool batch_verdicts, std::string who) = 0;
  // A call to check, in the order the calls arrived: its verdict goes out in that order.
  virtual void Queue(CallWork work) = 0;
  // A message of the server's own (a ReplicaVerdict), out of the calls' order, alone; dropped
  // once the stream has finished. From any thread, never with the session's reading side
  // waiting on it.
  virtual void Post(MessageBytes message) = 0;
};

// A call's check on a worker: the verdict's bytes, or none with the error that ends the stream
// (its message did not parse, the server ran out of memory).
struct CallAnswer {
  std::optional<MessageBytes> verdict;
  absl::Status error;
};

class StreamSession {
 public:
  // `context` and `output` must outlive the session. `session_id` is ServerInfo.session_id.
  StreamSession(StreamContext* context, StreamOutput* output, std::string peer,
                uint64_t session_id);

  StreamState state() const { return state_.load(std::memory_order_acquire); }
  const std::string& peer() const { return peer_; }  // gRPC's name of the agent's end

  // One message read from the stream (its bytes may be moved out). Not OK: the message broke a
  // rule of the protocol (or the server ran out of memory for it); the caller ends the reading
  // side (EndReading). Never throws. The reading side only.
  absl::Status OnMessage(MessageBytes& bytes);
  uint64_t messages() const { return messages_; }  // read so far

  // Nothing more is read: kAwaitingHello or kStreaming -> kDraining. Returns whether it moved.
  bool EndReading();
  // The stream's end went out: kDraining -> kFinished (a no-op in any other state).
  void Finish();

  // The Hello's origin: set once the Hello is accepted, read by workers after (the work queue
  // orders the accesses); null before.
  const CallOrigin* origin() const { return hello_ ? &origin_ : nullptr; }

  // A call's check, on a worker: parses `work.raw` when the reaction did not, makes the
  // ServerCall, checks it through the context, encodes the verdict from what the check decided
  // and serializes it. Never throws.
  CallAnswer RunCall(CallWork work) const;

  // Gives back the bytes of blobs of no call and the kept-blob offer, and closes the stream's
  // replica mailbox. After the last message, before the stream's output goes away.
  void Close();

 private:
  absl::Status Handle(MessageBytes& bytes, bool in_batch);
  absl::Status HandleBatch(MessageBytes& bytes);
  absl::Status HandleParsed(v1::AgentMessage& m, bool in_batch);
  absl::Status RouteHello(v1::AgentMessage& m);
  absl::Status RouteCall(v1::AgentMessage& m);
  absl::Status RouteChunk(v1::AgentMessage& m);
  absl::Status RouteStats(v1::AgentMessage& m);
  absl::Status RouteGoodbye(v1::AgentMessage& m);
  absl::Status RouteRelease(v1::AgentMessage& m);
  absl::Status RouteReplica(v1::AgentMessage& m);
  absl::Status OnHello(const v1::Hello& hello);
  void OnStats(const v1::AgentStats& stats);
  // One call: `raw` or `call` set (CallWork). `sequence` is unknown for bytes that do not parse
  // (the worker reports them).
  absl::Status OnCall(std::optional<uint64_t> sequence, std::shared_ptr<MessageBytes> raw,
                      std::shared_ptr<v1::ApiCall> call, std::vector<uint64_t> kept_blob_ids);
  absl::Status AdmitSequence(std::optional<uint64_t> sequence);  // increasing, above 0

  StreamContext* const context_;
  StreamOutput* const output_;
  const std::string peer_;
  const uint64_t session_id_;
  std::atomic<StreamState> state_{StreamState::kAwaitingHello};

  // The reading side's own (reactions, one at a time).
  uint64_t messages_ = 0;       // read before the one being handled
  bool hello_ = false;          // origin_ is set (stays true once the stream drains)
  bool replicas_only_ = false;  // Hello.replicas_only: ReplicaReports only, no calls
  CallOrigin origin_;
  BlobAssembler blobs_;  // chunked tensors and kept blobs (server/service/blob_assembler.h)
  uint64_t last_sequence_ = 0;
  std::string agent_;  // the agent across its streams: Hello's run_id, hostname, pid, rank

  // Where the replica checker delivers this stream's outcomes (server/call/replica.h): posts
  // them to the output until Close().
  class Mailbox final : public ReplicaMailbox {
   public:
    explicit Mailbox(StreamOutput* output) : output_(output) {}
    void Deliver(const ReplicaOutcome& outcome) override;
    void Close();

   private:
    absl::Mutex mu_;
    StreamOutput* output_ ABSL_GUARDED_BY(mu_);
  };
  std::shared_ptr<Mailbox> mailbox_;  // made at the stream's first ReplicaReport
};

}  // namespace parity::server
