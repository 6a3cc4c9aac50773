#include "agent/sender.h"

#include "agent/call_encoder.h"
#include "agent/check_stream.h"
#include "agent/server_list.h"
#include "agent/thread_priority.h"

#include <grpcpp/grpcpp.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/cpu_clock.h"
#include "common/dtype.h"
#include "common/grpc_tuning.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/net.h"
#include "common/tls.h"
#include "common/wire.h"
#include "parity/v1/parity.grpc.pb.h"

#ifndef PARITY_VERSION
#define PARITY_VERSION "unknown"
#endif

namespace parity::agent {

SenderOptions SenderOptionsFor(const common::AgentConfig& c, const std::string& framework_version,
                               const std::string& device_type) {
  const common::AgentOptions& o = c.parity;
  SenderOptions s;
  s.host = c.host;
  s.port = static_cast<int>(c.port);
  s.plaintext = o.plaintext;
  s.tls_path = c.tls_path;
  s.server_name = o.server_name;
  s.tls_key_password_file = o.tls_key_password_file;
  s.connect_timeout_ms = o.connect_timeout_ms;
  s.reconnect_initial_ms = o.reconnect_initial_ms;
  s.reconnect_max_ms = o.reconnect_max_ms;
  s.flush_timeout_ms = o.flush_timeout_ms;
  s.wait_for_server_at_exit = o.wait_for_server_at_exit;
  s.stats_interval_ms = o.stats_interval_ms;
  s.queue_max_bytes = o.queue_max_bytes;
  s.queue_max_calls = o.queue_max_calls;
  s.batch_calls = o.batch_calls;
  s.background_nice = static_cast<int>(o.background_nice);
  s.policy = o.policy;
  s.block_timeout_ms = o.block_timeout_ms;
  s.max_inline_tensor_bytes = o.max_inline_tensor_bytes;
  s.reuse_bytes = o.reuse_bytes;
  s.max_tensor_bytes = o.max_tensor_bytes;
  s.checksum = o.checksum;
  v1::Hello& h = s.hello;
  h.set_protocol_version(common::kProtocolVersion);
  h.set_run_id(o.run_id);
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  h.set_hostname(host);
  h.set_pid(::getpid());
  h.set_agent_version(PARITY_VERSION);
  h.set_framework_version(framework_version);
  h.set_device_type(device_type);
  h.set_config_digest(common::AgentConfigDigest(c));
  // The server may answer with VerdictBatches; parity.batch_calls 1 asks for every message
  // alone, both ways.
  h.set_accepts_batches(o.batch_calls > 1);
  return s;
}

struct Sender::Connection {
  std::atomic<bool> logged_unreadable{false};
  std::unique_ptr<CheckStream> stream;  // destroyed first: its callbacks use the flag above
  // The payloads this stream's server keeps (TensorChunk.keep); null when either side keeps none.
  std::unique_ptr<SentPayloads> sent;
};

Sender::Sender(SenderOptions options, AgentCounters& counters,
               std::function<void(const v1::Verdict&)> on_verdict, std::function<int64_t()> step)
    : options_(std::move(options)),
      counters_(counters),
      on_verdict_(std::move(on_verdict)),
      step_(std::move(step)),
      queue_(options_.queue_max_calls, options_.queue_max_bytes) {}

Sender::~Sender() { Close(); }

void Sender::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Run(); });
}

PushResult Sender::Push(std::unique_ptr<CapturedCall> call) {
  const uint64_t bytes = call->bytes;
  // Counted before it is visible to the sender thread, which may finish it at once.
  pending_.fetch_add(1);
  PushResult r;
  if (options_.policy == common::QueuePolicy::kBlock) {
    // Exhaustive mode: wait for room, but only while the server is there to make room, or may
    // be: during the first connection attempt (at most connect_timeout_ms), so that a training
    // that starts with its server does not lose its first calls to the connection's set-up.
    r = queue_.PushWait(std::move(call), bytes,
                        std::chrono::milliseconds(options_.block_timeout_ms),
                        [this] { return counters_.connected() || first_attempt_.load(); });
  } else {
    r = queue_.TryPush(std::move(call), bytes);
  }
  if (r != PushResult::kOk) pending_.fetch_sub(1);
  return r;
}

bool Sender::Waiting(std::chrono::milliseconds d) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + absl::FromChrono(d);
  while (!stopping_ && !cv_.WaitWithDeadline(&mu_, deadline)) {
  }
  return !stopping_;
}

void Sender::LogOnce(const std::string& message, common::LogLevel level) {
  if (message != last_error_) common::Log(level, message);
  last_error_ = message;
}

void Sender::Run() {
  if (options_.enter_thread) options_.enter_thread();
#if defined(__linux__)
  pthread_setname_np(pthread_self(), "parity-sender");  // in top, perf and gdb
#endif
  LowerThisThreadOnce(options_.background_nice);
  auto last_stats = std::chrono::steady_clock::now();
  double backoff_ms = options_.reconnect_initial_ms;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    // Nothing may end this thread but Close(): an exception (an allocation failure encoding a
    // call, say) is logged and the loop goes on, and the training with it.
    try {
      RunOnce(&last_stats, &backoff_ms);
    } catch (const std::exception& e) {
      common::LogError(absl::StrCat("sender: ", e.what(), "; going on"));
    } catch (...) {
      common::LogError("sender: unknown exception; going on");
    }
  }
  try {
    if (conn_) Disconnect(/*goodbye=*/true);
  } catch (const std::exception& e) {
    common::LogError(absl::StrCat("sender: closing the stream: ", e.what()));
  }
}

void Sender::RunOnce(std::chrono::steady_clock::time_point* last_stats, double* backoff_ms) {
  if (!conn_) {
    const bool connected = Connect();
    if (first_attempt_.exchange(false)) queue_.Wake();  // blocked pushers re-check
    if (!connected) {
      // Jittered exponential back-off, capped: many ranks must not reconnect in lock-step.
      static thread_local std::mt19937 rng(static_cast<uint32_t>(::getpid()));
      const double jitter = std::uniform_real_distribution<double>(0.5, 1.0)(rng);
      Waiting(std::chrono::milliseconds(static_cast<int64_t>(*backoff_ms * jitter)));
      *backoff_ms = std::min<double>(*backoff_ms * 2, options_.reconnect_max_ms);
      return;
    }
    *backoff_ms = options_.reconnect_initial_ms;
  }
  if (conn_->stream->done()) {
    // The server ended the stream (or died): count what it never answered, then reconnect now
    // rather than at the next failed write.
    Disconnect(false);
    return;
  }
  std::unique_ptr<CapturedCall> call;
  if (queue_.Pop(&call, std::chrono::milliseconds(200)) == PopResult::kItem) {
    // The calls already waiting go with it, in one message, to a server that takes batches.
    std::vector<std::unique_ptr<CapturedCall>> calls;
    calls.push_back(std::move(call));
    const std::size_t limit = accepts_batches_ ? std::max<uint32_t>(options_.batch_calls, 1) : 1;
    while (calls.size() < limit && queue_.TryPop(&call)) calls.push_back(std::move(call));
    const std::size_t written = SendCalls(calls);
    if (written < calls.size()) {
      counters_.Dropped(DropReason::kDisconnected, calls.size() - written);
      Disconnect(false);
    }
    // Written or counted as dropped: only now may Flush() consider them done.
    absl::MutexLock lock(&mu_);
    pending_.fetch_sub(calls.size());
    cv_.SignalAll();
  }
  // Stats every stats_interval_ms; sooner when a held-back write has nothing left to follow it
  // (a cleared queue), since they send it.
  const bool stats_due = std::chrono::steady_clock::now() - *last_stats >
                         std::chrono::milliseconds(options_.stats_interval_ms);
  if (conn_ && (stats_due || (unflushed_ && queue_.size() == 0))) {
    SendStats(false);
    *last_stats = std::chrono::steady_clock::now();
  }
}

bool Sender::OpenChannel() {
  if (channel_) return true;
  grpc::ChannelArguments args;
  for (const auto& [name, value] : common::StreamChannelArgs()) args.SetInt(name, value);
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 16 << 20);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.reconnect_max_ms));
  absl::StatusOr<std::vector<ServerEndpoint>> servers =
      ParseServerList(options_.host, options_.port);
  if (!servers.ok()) {
    LogOnce(absl::StrCat(servers.status().message(), "; nothing will be checked"),
            common::LogLevel::kError);
    undeliverable_.store(true);
    return false;
  }
  std::vector<std::string> unresolved;
  absl::StatusOr<ChannelTarget> target =
      ResolveServers(*servers, options_.hello.rank(), &unresolved);
  for (const std::string& u : unresolved) {
    LogOnce(absl::StrCat("server ", u, "; left out"), common::LogLevel::kWarning);
  }
  if (!target.ok()) {
    LogOnce(absl::StrCat(target.status().message(), "; retrying in the background"),
            common::LogLevel::kWarning);
    return false;
  }
  first_server_ = servers->front();
  const bool several = target->addresses.size() > 1;
  // pick_first over the rank-rotated list: one connection, to server rank mod n, and the next
  // one when it dies (docs/deploy.md#many-servers).
  if (several) args.SetLoadBalancingPolicyName("pick_first");
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options_.plaintext) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    auto tls = common::LoadChannelTls(options_.tls_path, options_.tls_key_password_file);
    if (!tls.ok()) {
      LogOnce(absl::StrCat("TLS set-up failed, nothing will be checked: ", tls.status().ToString()),
              common::LogLevel::kError);
      undeliverable_.store(true);  // until the files change: retried, but not waited for
      return false;
    }
    creds = tls->credentials;
    crl_ = tls->crl;
    if (!options_.server_name.empty()) {
      args.SetSslTargetNameOverride(options_.server_name);
    } else if (several) {
      args.SetSslTargetNameOverride(target->tls_name);  // an address list carries no name
    }
  }
  target_text_ = several ? absl::StrCat(target->addresses.front(), " (first of ",
                                        target->addresses.size(), " servers)")
                         : target->uri;
  channel_ = grpc::CreateCustomChannel(target->uri, creds, args);
  return true;
}

bool Sender::Connect() {
  if (!OpenChannel()) {
    unreachable_.store(true);
    return false;
  }
  const std::string target = target_text_;
  if (!WaitForConnected(std::chrono::milliseconds(options_.connect_timeout_ms))) {
    // gRPC says only "unavailable"; a connection of our own says why (refused port, no route,
    // untrusted server, refused client certificate, plaintext server, wrong name, a hung
    // server). While the session is ending too, within a second: the reason is the one thing
    // a short training's user needs.
    const int budget =
        static_cast<int>(closing_.load() ? std::min<uint32_t>(options_.connect_timeout_ms, 1000)
                                         : options_.connect_timeout_ms);
    std::string why;
    if (options_.plaintext) {
      std::string error;
      const int fd = common::ConnectTcp(first_server_.host, first_server_.port, budget, &error);
      if (fd >= 0) {
        ::close(fd);
        why = absl::StrCat("the server at ", first_server_.host, ":", first_server_.port,
                           " accepts TCP connections but does not answer as a plaintext gRPC "
                           "server (one with TLS, or another service?)");
      } else {
        why = error;
      }
    } else {
      why = common::DiagnoseTlsConnection(first_server_.host, first_server_.port, options_.tls_path,
                                          options_.server_name, budget,
                                          options_.tls_key_password_file);
    }
    LogOnce(absl::StrCat("server ", target, " unreachable", why.empty() ? "" : ": ", why,
                         closing_.load() ? "; the session is ending: its calls are not checked"
                                         : "; retrying in the background"),
            common::LogLevel::kWarning);
    unreachable_.store(true);
    return false;
  }
  auto c = std::make_unique<Connection>();
  Connection* raw = c.get();
  c->stream = std::make_unique<CheckStream>(
      channel_, [this, raw](grpc::ByteBuffer& bytes) { OnServerMessage(raw, bytes); },
      [this] { OnStreamEnd(); }, options_.background_nice);
  {
    absl::MutexLock lock(&mu_);
    live_stream_ = c->stream.get();
    if (stopping_) c->stream->Cancel();
  }
  if (!Handshake(c)) return false;
  conn_ = std::move(c);
  undeliverable_.store(false);
  unreachable_.store(false);
  if (ever_connected_) counters_.Reconnected();
  ever_connected_ = true;
  counters_.SetConnected(true);
  queue_.Wake();
  last_error_.clear();
  return true;
}

grpc::Status Sender::AbandonStream(std::unique_ptr<Connection>& c, bool cancel) {
  if (cancel) {
    c->stream->Cancel();
  } else {
    c->stream->WritesDone();
  }
  grpc::Status s = c->stream->Finish(absl::Seconds(3));
  {
    absl::MutexLock lock(&mu_);
    live_stream_ = nullptr;
  }
  c.reset();
  return s;
}

bool Sender::Handshake(std::unique_ptr<Connection>& c) {
  // The server's address once the call has one (gRPC names the channel's target until then).
  std::string target = c->stream->Peer();
  if (target.empty() || target.find(',') != std::string::npos) target = target_text_;
  v1::AgentMessage hello;
  *hello.mutable_hello() = options_.hello;
  v1::ServerMessage reply;
  std::optional<grpc::ByteBuffer> reply_bytes;
  if (!c->stream->Write(common::Serialize(hello), /*more=*/false) ||
      !(reply_bytes = c->stream->AwaitFirst()) || !common::Parse(*reply_bytes, &reply) ||
      !reply.has_server_info()) {
    const grpc::Status s = AbandonStream(c, /*cancel=*/false);
    LogOnce(absl::StrCat("server ", target, " refused the stream: ", s.error_message(), " (code ",
                         static_cast<int>(s.error_code()), ")"),
            common::LogLevel::kError);
    // Refused for what this agent is (its rank, its version, its Hello): retrying will not
    // change that, so the end of the session does not wait for it.
    const grpc::StatusCode code = s.error_code();
    undeliverable_.store(code == grpc::StatusCode::PERMISSION_DENIED ||
                         code == grpc::StatusCode::FAILED_PRECONDITION ||
                         code == grpc::StatusCode::INVALID_ARGUMENT ||
                         code == grpc::StatusCode::UNAUTHENTICATED);
    return false;
  }
  // crl.pem: a revoked server gets nothing but the Hello it has already read.
  if (crl_) {
    const std::string why = crl_->Revoked(c->stream->PeerCertificatePem());
    if (!why.empty()) {
      AbandonStream(c, /*cancel=*/true);
      LogOnce(absl::StrCat("refusing server ", target, ": its ", why, "; no call is sent to it"),
              common::LogLevel::kError);
      undeliverable_.store(true);
      return false;
    }
  }
  // The server's limits: the agent honours them (ServerInfo).
  const v1::ServerInfo& info = reply.server_info();
  max_inline_bytes_ = std::min<uint64_t>(options_.max_inline_tensor_bytes,
                                         std::max<uint64_t>(info.max_message_bytes() / 4, 4096));
  max_tensor_bytes_ = info.max_tensor_bytes() > 0
                          ? std::min<uint64_t>(options_.max_tensor_bytes, info.max_tensor_bytes())
                          : options_.max_tensor_bytes;
  // Half the server's limit: room for the batch's field headers (a few bytes an item).
  max_batch_bytes_ =
      info.max_message_bytes() > 0 ? info.max_message_bytes() / 2 : uint64_t{1} << 20;
  accepts_batches_ = info.accepts_batches();
  accepted_dtypes_.clear();
  for (int d : info.accepted_dtypes()) accepted_dtypes_.push_back(d);
  // Equal payloads named again: a fresh table per stream, within the server's cap.
  const uint64_t keep = std::min<uint64_t>(options_.reuse_bytes, info.kept_blob_bytes());
  if (keep > 0) c->sent = std::make_unique<SentPayloads>(keep);
  common::LogInfo(absl::StrCat("connected to ", target, " (server ", info.server_version(),
                               ", bench ", info.bench_device(), ", rank ", options_.hello.rank(),
                               ")"));
  return true;
}

bool Sender::WaitForConnected(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::system_clock::now() + timeout;
  for (;;) {
    // Slices of at most 100 ms, so that a stop never waits out a whole connect timeout.
    const auto slice =
        std::min(deadline, std::chrono::system_clock::now() + std::chrono::milliseconds(100));
    if (channel_->WaitForConnected(slice)) return true;
    if (std::chrono::system_clock::now() >= deadline) return false;
    // Once the session is ending, an attempt that already failed (a refused port fails at
    // once) ends here, so that its reason is logged before the end gives up; before, the whole
    // connect timeout is waited (a server starting beside the training is found).
    if (closing_.load() && !options_.wait_for_server_at_exit &&
        channel_->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      return false;
    }
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
  }
}

// On a gRPC callback thread: must not block.
void Sender::OnServerMessage(Connection* c, grpc::ByteBuffer& bytes) {
  v1::ServerMessage m;
  if (!common::Parse(bytes, &m)) {
    // Skipped: later verdicts still count. Logged once per connection, counted every time.
    counters_.Unreadable();
    if (!c->logged_unreadable.exchange(true)) {
      common::LogWarning(absl::StrCat("a message from the server (", bytes.Length(),
                                      " bytes) did not parse; ignored, and counted as "
                                      "unreadable (a server of another release, or not a "
                                      "Parity server?)"));
    }
    return;
  }
  uint64_t verdicts = 0;
  if (m.has_verdict()) {
    on_verdict_(m.verdict());
    verdicts = 1;
  } else if (m.has_batch()) {
    // Each item as if it had come alone (parity.proto, VerdictBatch).
    for (const v1::ServerMessage& item : m.batch().messages()) {
      if (!item.has_verdict()) {
        counters_.Unreadable();
        if (!c->logged_unreadable.exchange(true)) {
          common::LogWarning(
              "a VerdictBatch from the server held an item that is not a verdict; ignored, and "
              "counted as unreadable (a server of another release?)");
        }
        continue;
      }
      on_verdict_(item.verdict());
      ++verdicts;
    }
  }
  if (verdicts == 0) return;
  absl::MutexLock lock(&mu_);
  answered_ += verdicts;
  cv_.SignalAll();
}

// On a gRPC callback thread, once per stream.
void Sender::OnStreamEnd() {
  counters_.SetConnected(false);
  absl::MutexLock lock(&mu_);
  cv_.SignalAll();
}

void Sender::Disconnect(bool goodbye) {
  if (goodbye) SendStats(true);
  conn_->stream->WritesDone();
  // The server ends the stream after its last verdict; a wedged one is cancelled.
  const grpc::Status s = conn_->stream->Finish(absl::Seconds(3));
  if (!s.ok() && !goodbye) {
    common::LogWarning(
        absl::StrCat("stream to the server ended: ", s.error_message(), "; reconnecting"));
  }
  {
    absl::MutexLock lock(&mu_);
    live_stream_ = nullptr;
    // Verdicts of a stream that ended never come: those calls are lost, and counted so.
    counters_.LostInFlight(written_ - answered_);
    answered_ = written_;
    cv_.SignalAll();
  }
  counters_.SetConnected(false);
  conn_.reset();
}

bool Sender::Write(std::shared_ptr<const v1::AgentMessage> m, bool more) {
  grpc::ByteBuffer bytes = SerializeForWrite(std::move(m));
  const std::size_t length = bytes.Length();
  unflushed_ = more;
  if (!conn_->stream->Write(std::move(bytes), more)) return false;
  counters_.BytesWritten(length);
  return true;
}

grpc::ByteBuffer Sender::SerializeForWrite(std::shared_ptr<const v1::AgentMessage> m) {
  const double cpu_start = common::ThreadCpuSeconds();
  grpc::ByteBuffer bytes = common::SerializeShared(std::move(m));
  counters_.Spent(AgentCounters::Cost::kSerialize, common::ThreadCpuSeconds() - cpu_start);
  return bytes;
}

std::size_t Sender::SendCalls(std::vector<std::unique_ptr<CapturedCall>>& calls) {
  CallEncoding encoding;
  encoding.max_inline_tensor_bytes = max_inline_bytes_;
  encoding.max_tensor_bytes = max_tensor_bytes_;
  encoding.checksum = options_.checksum;
  encoding.accepted_dtypes = accepted_dtypes_.empty() ? nullptr : &accepted_dtypes_;
  encoding.sent = conn_->sent.get();
  // What goes in the next message: serialized items (each an AgentMessage), their bytes, and
  // the calls whose last item is among them (whether each went with its data).
  std::vector<grpc::ByteBuffer> items;
  std::size_t item_bytes = 0;
  std::vector<bool> completed;
  std::size_t written = 0;
  // One message: the item alone, or a MessageBatch of them. `more`: another write follows at
  // once, so gRPC may hold this one and send both together.
  auto flush = [&](bool more) {
    if (items.empty()) return true;
    grpc::ByteBuffer bytes = items.size() == 1
                                 ? std::move(items.front())
                                 : common::SerializeBatch(common::kAgentBatchField, items);
    items.clear();
    item_bytes = 0;
    const std::size_t length = bytes.Length();
    unflushed_ = more;
    if (!conn_->stream->Write(std::move(bytes), more)) return false;
    counters_.BytesWritten(length);
    for (const bool with_data : completed) {
      // A call whose data could not be encoded went out as a record only: it gets a verdict
      // (SKIP) like any other, and is counted as sent without data.
      if (with_data) {
        counters_.Sent();
      } else {
        counters_.SentWithoutData();
      }
    }
    written += completed.size();
    absl::MutexLock lock(&mu_);
    written_ += completed.size();
    completed.clear();
    return true;
  };
  // A message stays within half the server's limit, unless one item alone is larger, and within
  // the items a batch may hold.
  auto add = [&](grpc::ByteBuffer item) {
    if (!items.empty() &&
        (item_bytes + item.Length() > max_batch_bytes_ || items.size() == common::kMaxBatchItems) &&
        !flush(true)) {
      return false;
    }
    item_bytes += item.Length();
    items.push_back(std::move(item));
    return true;
  };
  for (std::unique_ptr<CapturedCall>& call : calls) {
    const double cpu_start = common::ThreadCpuSeconds();
    EncodedCall encoded = EncodeCall(*call, encoding, &next_blob_);
    counters_.Spent(AgentCounters::Cost::kEncode, common::ThreadCpuSeconds() - cpu_start);
    counters_.Reused(encoded.reused_bytes);
    // Releases first: the server's kept bytes stay within its cap when this call's blobs arrive.
    if (!encoded.release.empty()) {
      auto release = std::make_shared<v1::AgentMessage>();
      for (uint64_t id : encoded.release) release->mutable_release()->add_blob_ids(id);
      if (!add(SerializeForWrite(std::move(release)))) return written;
    }
    for (EncodedCall::Blob& blob : encoded.blobs) {
      for (auto& chunk : blob.chunks) {
        if (!add(SerializeForWrite(std::move(chunk)))) return written;
      }
    }
    const double serialize_start = common::ThreadCpuSeconds();
    grpc::ByteBuffer message = encoded.TakeMessage();
    counters_.Spent(AgentCounters::Cost::kSerialize, common::ThreadCpuSeconds() - serialize_start);
    if (!add(std::move(message))) return written;
    completed.push_back(encoded.with_data);
  }
  // Held back only while another call is queued: the sender pops it next, and its write (or,
  // failing that, the stats) sends both.
  flush(/*more=*/queue_.size() > 0);
  return written;
}

void Sender::SendStats(bool goodbye) {
  auto m = std::make_shared<v1::AgentMessage>();
  v1::AgentStats* stats =
      goodbye ? m->mutable_goodbye()->mutable_final_stats() : m->mutable_stats();
  counters_.FillStats(stats);
  stats->set_queue_depth(queue_.size());
  stats->set_step(step_());
  Write(std::move(m));
}

bool Sender::Flush(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  absl::MutexLock lock(&mu_);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pending_.load() == 0 && answered_ >= written_) return true;
    // Nothing can be delivered (TLS material unusable, or the server refused this agent): no
    // point in waiting. Nor, once the session is ending, for a server whose last connection
    // attempt failed: its reason is already in the log.
    if (undeliverable_.load() && !counters_.connected()) break;
    if (closing_.load() && unreachable_.load() && !counters_.connected() &&
        !options_.wait_for_server_at_exit) {
      break;
    }
    // The queue has its own condition variable: re-check in short slices.
    cv_.WaitWithTimeout(&mu_, absl::Milliseconds(20));
  }
  return pending_.load() == 0 && answered_ >= written_;
}

void Sender::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_ || stopping_) return;
  }
  // From here on the whole close takes flush_timeout_ms and little more: connection attempts
  // skip their diagnosis and wait in slices, and whatever is still in flight is cancelled.
  closing_.store(true);
  const bool flushed = Flush(std::chrono::milliseconds(options_.flush_timeout_ms));
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // A write blocked by a wedged server, or a handshake that never answers, must not hold the
    // training's exit: cancel the stream.
    if (!flushed && live_stream_ != nullptr) live_stream_->Cancel();
    cv_.SignalAll();
  }
  queue_.Close();
  thread_.join();
  const uint64_t cleared = queue_.Clear();
  pending_.fetch_sub(cleared);
  counters_.Dropped(DropReason::kStopped, cleared);
}

}  // namespace parity::agent
