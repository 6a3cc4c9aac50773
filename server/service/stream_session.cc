#include "server/service/stream_session.h"

#include "parity/v1/parity.pb.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/cpu_clock.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/base/text.h"
#include "common/transport/wire.h"
#include "server/call/replica_wire.h"
#include "server/call/verdict_encoder.h"
#include "server/metrics/metrics.h"
#include "server/service/agent_messages.h"
#include "server/service/check_service.h"
#include "server/service/grpc_bytes.h"

namespace parity::server {
namespace {

// The proto's name of each kind of AgentMessage, for the protocol errors.
absl::string_view MessageName(v1::AgentMessage::KindCase kind) {
  switch (kind) {
    case v1::AgentMessage::kHello:
      return "Hello";
    case v1::AgentMessage::kCall:
      return "ApiCall";
    case v1::AgentMessage::kChunk:
      return "TensorChunk";
    case v1::AgentMessage::kStats:
      return "AgentStats";
    case v1::AgentMessage::kGoodbye:
      return "Goodbye";
    case v1::AgentMessage::kRelease:
      return "BlobRelease";
    case v1::AgentMessage::kReplica:
      return "ReplicaReport";
    case v1::AgentMessage::kBatch:
      return "MessageBatch";
    case v1::AgentMessage::KIND_NOT_SET:
      break;
  }
  return "an empty AgentMessage";
}

absl::Status NeedHello(absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat("protocol error: ", what, " before Hello; the first message must be Hello"));
}

// A replicas-only stream (Hello.replicas_only) carries no call: what it must not carry.
absl::Status NotOnReplicaStream(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("protocol error: ", what,
                   " on a replicas-only stream (Hello.replicas_only carries only "
                   "ReplicaReport and Goodbye)"));
}

}  // namespace

absl::string_view StreamStateName(StreamState state) {
  switch (state) {
    case StreamState::kAwaitingHello:
      return "awaiting hello";
    case StreamState::kStreaming:
      return "streaming";
    case StreamState::kDraining:
      return "draining";
    case StreamState::kFinished:
      return "finished";
  }
  return "unknown";
}

StreamSession::StreamSession(StreamContext* context, StreamOutput* output, std::string peer,
                             uint64_t session_id)
    : context_(context),
      output_(output),
      peer_(std::move(peer)),
      session_id_(session_id),
      blobs_(context->options().limits, context->partial_blobs(), context->kept_offered()) {}

bool StreamSession::EndReading() {
  StreamState s = state();
  while (s == StreamState::kAwaitingHello || s == StreamState::kStreaming) {
    if (state_.compare_exchange_weak(s, StreamState::kDraining, std::memory_order_acq_rel)) {
      return true;
    }
  }
  return false;
}

void StreamSession::Finish() {
  StreamState draining = StreamState::kDraining;
  state_.compare_exchange_strong(draining, StreamState::kFinished, std::memory_order_acq_rel);
}

absl::Status StreamSession::OnMessage(MessageBytes& bytes) {
  const std::size_t size = bytes.size();
  absl::Status s;
  try {
    s = Handle(bytes, /*in_batch=*/false);
  } catch (const std::bad_alloc&) {
    // Out of memory for this message: this stream ends with a status, the server goes on.
    s = absl::ResourceExhaustedError(absl::StrCat("out of memory while receiving message ",
                                                  messages_ + 1, " on this stream (", size,
                                                  " bytes); the stream ends"));
  } catch (const std::exception& e) {
    s = absl::InternalError(
        absl::StrCat("while receiving message ", messages_ + 1, ": ", e.what()));
  }
  ++messages_;
  return s;
}

// An ApiCall goes to a worker unparsed (the worker parses it: the tensors are copied there, not
// on the reading thread); any other message is small and parsed here.
absl::Status StreamSession::Handle(MessageBytes& in, bool in_batch) {
  const Peek peek = PeekMessage(in);
  if (peek.kind == v1::AgentMessage::kCall) {
    if (!hello_) return NeedHello("ApiCall");
    if (replicas_only_) return NotOnReplicaStream("ApiCall");
    if (ServerMetrics* m = context_->metrics())
      m->CallReceived(static_cast<wire::Phase>(peek.phase));
    // A malformed call has no sequence to check: its worker reports the bytes as malformed.
    return OnCall(peek.well_formed ? std::optional<uint64_t>(peek.sequence) : std::nullopt,
                  std::make_shared<MessageBytes>(std::move(in)), nullptr,
                  peek.well_formed ? peek.kept_blob_ids : std::vector<uint64_t>{});
  }
  if (peek.kind == v1::AgentMessage::kBatch) {
    if (in_batch) return absl::InvalidArgumentError("a MessageBatch inside a MessageBatch");
    if (!hello_) return NeedHello("MessageBatch");
    if (replicas_only_) return NotOnReplicaStream("MessageBatch");
    return HandleBatch(in);
  }
  v1::AgentMessage m;
  const bool parsed = ParseMessage(in, &m);
  const std::size_t bytes = in.size();
  in.Clear();
  if (!parsed) return NotAMessage(messages_, bytes);
  return HandleParsed(m, in_batch);
}

absl::Status StreamSession::HandleParsed(v1::AgentMessage& m, bool in_batch) {
  // One row a kind: its handler, whether a MessageBatch may carry it, whether the stream's Hello
  // must come first.
  struct Route {
    v1::AgentMessage::KindCase kind;
    bool in_batch;
    bool needs_hello;
    absl::Status (StreamSession::*handle)(v1::AgentMessage& m);
  };
  static constexpr Route kRoutes[] = {
      {v1::AgentMessage::kHello, false, false, &StreamSession::RouteHello},
      {v1::AgentMessage::kCall, true, true, &StreamSession::RouteCall},
      {v1::AgentMessage::kChunk, true, true, &StreamSession::RouteChunk},
      {v1::AgentMessage::kStats, false, true, &StreamSession::RouteStats},
      {v1::AgentMessage::kGoodbye, false, true, &StreamSession::RouteGoodbye},
      {v1::AgentMessage::kRelease, true, true, &StreamSession::RouteRelease},
      {v1::AgentMessage::kReplica, false, true, &StreamSession::RouteReplica},
  };
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (r.kind == m.kind_case()) route = &r;
  }
  if (in_batch && (route == nullptr || !route->in_batch)) {
    return absl::InvalidArgumentError(
        "only ApiCall, TensorChunk and BlobRelease may be items of a MessageBatch");
  }
  if (route == nullptr) {
    return absl::InvalidArgumentError(
        "empty AgentMessage: none of hello, call, chunk, stats, goodbye, release, batch, replica "
        "is set "
        "(is the agent newer than this server?)");
  }
  if (route->needs_hello && !hello_) return NeedHello(MessageName(m.kind_case()));
  if (replicas_only_ && route->in_batch) return NotOnReplicaStream(MessageName(m.kind_case()));
  return (this->*route->handle)(m);
}

absl::Status StreamSession::RouteHello(v1::AgentMessage& m) { return OnHello(m.hello()); }

absl::Status StreamSession::RouteCall(v1::AgentMessage& m) {
  auto call = std::make_shared<v1::ApiCall>();
  call->Swap(m.mutable_call());
  if (ServerMetrics* metrics = context_->metrics())
    metrics->CallReceived(static_cast<wire::Phase>(call->phase()));
  const uint64_t sequence = call->sequence();
  std::vector<uint64_t> listed(call->kept_blob_ids().begin(), call->kept_blob_ids().end());
  return OnCall(sequence, nullptr, std::move(call), std::move(listed));
}

absl::Status StreamSession::RouteChunk(v1::AgentMessage& m) { return blobs_.OnChunk(m.chunk()); }

absl::Status StreamSession::RouteStats(v1::AgentMessage& m) {
  OnStats(m.stats());
  return absl::OkStatus();
}

absl::Status StreamSession::RouteGoodbye(v1::AgentMessage& m) {
  OnStats(m.goodbye().final_stats());
  return absl::OkStatus();
}

absl::Status StreamSession::RouteRelease(v1::AgentMessage& m) {
  return blobs_.OnRelease(m.release());
}

// A ReplicaReport goes to the server's replica checker; the comparison's outcome comes back to
// this stream through its mailbox, whenever the group is complete.
absl::Status StreamSession::RouteReplica(v1::AgentMessage& m) {
  PARITY_ASSIGN_OR_RETURN(ReplicaReport report,
                          ReplicaReportFromWire(m.replica(), origin_.run_id, origin_.rank));
  ReplicaSink* sink = context_->options().replicas;
  if (sink == nullptr) return absl::OkStatus();  // a server without a replica checker
  if (!mailbox_) mailbox_ = std::make_shared<Mailbox>(output_);
  sink->Report(std::move(report), mailbox_);
  return absl::OkStatus();
}

void StreamSession::Mailbox::Deliver(const ReplicaOutcome& outcome) {
  v1::ServerMessage m;
  *m.mutable_replica() = ReplicaVerdictToWire(outcome);
  MessageBytes bytes = SerializeMessage(m);
  absl::MutexLock lock(&mu_);
  if (output_ != nullptr) output_->Post(std::move(bytes));
}

void StreamSession::Mailbox::Close() {
  absl::MutexLock lock(&mu_);
  output_ = nullptr;
}

void StreamSession::Close() {
  blobs_.Close();
  if (mailbox_) mailbox_->Close();  // outcomes still to come are dropped
}

absl::Status StreamSession::HandleBatch(MessageBytes& in) {
  // Each item is a view of this message's bytes: a call still goes to its worker unparsed.
  absl::StatusOr<std::vector<MessageBytes>> items = SplitBatch(in);
  in.Clear();
  if (!items.ok()) {
    return absl::Status(
        items.status().code(),
        absl::StrCat("message ", messages_ + 1, " on this stream: ", items.status().message()));
  }
  for (std::size_t i = 0; i < items->size(); ++i) {
    const absl::Status s = Handle((*items)[i], /*in_batch=*/true);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("MessageBatch item ", i + 1, " of ", items->size(),
                                                 ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status StreamSession::OnHello(const v1::Hello& hello) {
  if (hello_) return absl::FailedPreconditionError("protocol error: a second Hello");
  if (hello.protocol_version() != kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unsupported protocol version ", hello.protocol_version(), ": this server speaks ",
        kProtocolVersion, "; use an agent and server of the same release"));
  }
  PARITY_RETURN_IF_ERROR(ValidateHello(hello));
  const ServiceOptions& options = context_->options();
  const auto& ranks = options.rank_list;
  // A group's reports come to the server the group picks, whichever server checks the rank.
  if (!hello.replicas_only() && !ranks.empty() &&
      std::find(ranks.begin(), ranks.end(), hello.rank()) == ranks.end()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "rank ", hello.rank(), " is not in this server's rank_list; another server checks it"));
  }
  StreamState awaiting = StreamState::kAwaitingHello;
  if (!state_.compare_exchange_strong(awaiting, StreamState::kStreaming,
                                      std::memory_order_acq_rel)) {
    // A worker ended the stream meanwhile (it could not have had calls: none came before Hello).
    return absl::CancelledError("the stream is ending");
  }
  hello_ = true;
  replicas_only_ = hello.replicas_only();
  context_->NoteConfigDigest(hello.run_id(), hello.rank(), hello.config_digest());
  origin_.rank = hello.rank();
  if (ServerMetrics* m = context_->metrics()) m->RankSeen(hello.rank());
  origin_.run_id = hello.run_id();
  origin_.hostname = hello.hostname();
  origin_.framework = hello.framework_version();
  agent_ =
      absl::StrCat(hello.run_id(), "\n", hello.hostname(), "\n", hello.pid(), "\n", hello.rank());
  common::LogInfo(absl::StrCat(
      replicas_only_ ? "agent's replica stream connected: rank " : "agent connected: rank ",
      hello.rank(), " of ", hello.world_size(), ", host ", common::Printable(hello.hostname()),
      ", pid ", hello.pid(), ", ",
      hello.framework_version().empty() ? std::string("framework not said")
                                        : common::Printable(hello.framework_version()),
      ", run ", common::Printable(hello.run_id()), ", from ", peer_));
  v1::ServerMessage reply;
  v1::ServerInfo& info = *reply.mutable_server_info();
  const ServiceOptions::Facts& facts = options.server;
  info.set_server_version(facts.server_version);
  info.set_max_message_bytes(facts.max_message_bytes);
  info.set_max_tensor_bytes(facts.max_tensor_bytes);
  info.set_max_call_bytes(facts.max_call_bytes);
  for (int d = v1::DTYPE_BOOL; d <= v1::DTYPE_COMPLEX128; ++d) {
    info.add_accepted_dtypes(static_cast<v1::DType>(d));
  }
  info.set_bench_device(facts.bench_device);
  info.set_golden_enabled(facts.golden_enabled);
  info.set_torch_version(facts.torch_version);
  info.set_kept_blob_bytes(blobs_.OfferKept(facts.kept_blob_bytes));
  info.set_accepts_batches(true);
  info.set_protocol_version(kProtocolVersion);
  info.set_session_id(absl::StrCat(session_id_));
  output_->Answer(SerializeMessage(reply), hello.accepts_batches(),
                  absl::StrCat("rank ", hello.rank()));
  return absl::OkStatus();
}

void StreamSession::OnStats(const v1::AgentStats& stats) {
  ServerMetrics* m = context_->metrics();
  // A replica stream's agent reports its counters on its call stream (maybe to another server).
  if (m == nullptr || replicas_only_) return;
  // Agent counters are cumulative since the agent started, over all its streams: the server
  // counts each increase once per agent, whichever of its streams reports it.
  const v1::AgentStats last = context_->ExchangeAgentStats(agent_, stats);
  if (stats.captured_calls() > last.captured_calls()) {
    m->AgentCaptured(stats.captured_calls() - last.captured_calls());
  }
  for (const auto& [reason, n] : stats.dropped_calls()) {
    auto it = last.dropped_calls().find(reason);
    const uint64_t before = it == last.dropped_calls().end() ? 0 : it->second;
    if (n > before) m->AgentDropped(reason, n - before);
  }
  if (stats.lost_in_flight_calls() > last.lost_in_flight_calls()) {
    m->AgentDropped("lost_in_flight", stats.lost_in_flight_calls() - last.lost_in_flight_calls());
  }
}

absl::Status StreamSession::AdmitSequence(std::optional<uint64_t> sequence) {
  if (!sequence) return absl::OkStatus();
  if (*sequence == 0 || *sequence <= last_sequence_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ApiCall.sequence ", *sequence, " after ", last_sequence_,
                     " on this stream: sequence numbers must increase from one call to the next, "
                     "starting above 0"));
  }
  last_sequence_ = *sequence;
  return absl::OkStatus();
}

absl::Status StreamSession::OnCall(std::optional<uint64_t> sequence,
                                   std::shared_ptr<MessageBytes> raw,
                                   std::shared_ptr<v1::ApiCall> call,
                                   std::vector<uint64_t> kept_blob_ids) {
  PARITY_RETURN_IF_ERROR(AdmitSequence(sequence));
  CallWork work;
  PARITY_ASSIGN_OR_RETURN(work.blobs, blobs_.TakeForCall(sequence.value_or(0), kept_blob_ids));
  work.bytes = work.blobs->bytes() + (raw ? raw->size() : call->ByteSizeLong());
  work.message = messages_;
  work.raw = std::move(raw);
  work.call = std::move(call);
  output_->Queue(std::move(work));
  return absl::OkStatus();
}

CallAnswer StreamSession::RunCall(CallWork work) const {
  CallAnswer out;
  try {
    if (work.raw) {
      v1::AgentMessage m;
      const double parse_start = common::ThreadCpuSeconds();
      const bool parsed = ParseMessage(*work.raw, &m);
      if (ServerMetrics* metrics = context_->metrics()) {
        metrics->StageCpu(ServerMetrics::Stage::kParse, common::ThreadCpuSeconds() - parse_start);
      }
      if (!parsed) {
        out.error = NotAMessage(work.message, work.raw->size());
        return out;
      }
      work.raw.reset();  // the bytes, now copied into the message
      work.call = std::make_shared<v1::ApiCall>();
      work.call->Swap(m.mutable_call());
    }
    v1::ServerMessage msg;
    const ServerCall server_call(*work.call, origin_.framework);  // names and traits, made once
    // The one encoding of what the check decided (server/call/verdict_encoder.h).
    *msg.mutable_verdict() =
        ToVerdict(server_call, context_->sink().Run(origin_, server_call, *work.blobs));
    out.verdict = SerializeMessage(msg);
  } catch (const std::bad_alloc&) {
    out.verdict.reset();
    out.error = absl::ResourceExhaustedError(absl::StrCat("out of memory while checking message ",
                                                          work.message + 1, "; the stream ends"));
  } catch (const std::exception& e) {
    out.verdict.reset();
    out.error = absl::InternalError(
        absl::StrCat("while checking message ", work.message + 1, ": ", e.what()));
  }
  return out;
}

}  // namespace parity::server
