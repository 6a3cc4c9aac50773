#include "agent/transport/connection.h"

#include "parity/v1/parity.pb.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/transport/check_stream.h"
#include "common/base/log.h"
#include "common/transport/grpc_tuning.h"
#include "common/transport/net.h"
#include "common/transport/wire.h"

namespace parity::agent {

struct Connection::Live {
  std::atomic<bool> logged_unreadable{false};
  std::unique_ptr<CheckStream> stream;  // destroyed first: its callbacks use the flag above
};

LinkOptions LinkOptions::From(const common::AgentConfig& config) {
  LinkOptions l;
  static_cast<common::LinkKeys&>(l) = config.parity.link;
  l.host = config.host;
  l.port = config.port;
  l.tls_path = config.tls_path;
  return l;
}

Connection::Connection(LinkOptions options, AgentCounters& counters, Callbacks callbacks)
    : options_(std::move(options)), counters_(counters), callbacks_(std::move(callbacks)) {}

Connection::~Connection() = default;

void Connection::LogOnce(const std::string& message, common::LogLevel level) {
  if (message != last_error_) common::Log(level, message);
  last_error_ = message;
}

bool Connection::OpenChannel() {
  if (channel_) return true;
  grpc::ChannelArguments args;
  for (const auto& [name, value] : common::StreamChannelArgs()) args.SetInt(name, value);
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 16 << 20);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(options_.reconnect_max_ms));
  absl::StatusOr<std::vector<ServerEndpoint>> servers =
      ParseServerList(options_.host, static_cast<int>(options_.port));
  if (!servers.ok()) {
    LogOnce(absl::StrCat(servers.status().message(), "; nothing will be checked"),
            common::LogLevel::kError);
    state_.store(LinkState::kUndeliverable);
    return false;
  }
  std::vector<std::string> unresolved;
  absl::StatusOr<ChannelTarget> target = ResolveServers(
      *servers, options_.spread >= 0 ? options_.spread : int64_t{options_.hello.rank()},
      &unresolved);
  for (const std::string& u : unresolved) {
    LogOnce(absl::StrCat("server ", u, "; left out"), common::LogLevel::kWarning);
  }
  if (!target.ok()) {
    LogOnce(absl::StrCat(target.status().message(), "; retrying in the background"),
            common::LogLevel::kWarning);
    return false;
  }
  first_server_ = servers->front();
  server_count_ = target->addresses.size();
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
      state_.store(LinkState::kUndeliverable);  // until the files change: retried, not waited for
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

bool Connection::AcceptsTcp(std::chrono::milliseconds budget) const {
  absl::StatusOr<std::vector<ServerEndpoint>> servers =
      ParseServerList(options_.host, static_cast<int>(options_.port));
  if (!servers.ok() || servers->empty()) return false;
  std::string error;
  const int fd = common::ConnectTcp(servers->front().host, servers->front().port,
                                    static_cast<int>(budget.count()), &error);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// A connection attempt that timed out: says why, from a connection of the agent's own. False.
bool Connection::AttemptFailed(const std::string& target, bool closing) {
  // gRPC says only "unavailable"; a connection of our own says why (refused port, no route,
  // untrusted server, refused client certificate, plaintext server, wrong name, a hung
  // server). While the session is ending too, within a second: the reason is the one thing
  // a short training's user needs.
  const int budget =
      static_cast<int>(closing ? std::min<uint32_t>(options_.connect_timeout_ms, 1000)
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
    why =
        common::DiagnoseTlsConnection(first_server_.host, first_server_.port, options_.tls_path,
                                      options_.server_name, budget, options_.tls_key_password_file);
  }
  if (why.empty()) {
    // The diagnosis's own connection got through: the server is there (it was restarting,
    // or too busy to finish gRPC's connection in time). Not "unreachable": the next attempt
    // comes soon, and an ending session makes it.
    LogOnce(absl::StrCat("server ", target, " did not finish a connection in time (",
                         "parity.connect_timeout_ms ", options_.connect_timeout_ms,
                         "), though a connection of the agent's own reached it just after "
                         "(a server restarting, or overloaded?); retrying soon"),
            common::LogLevel::kWarning);
    state_.store(LinkState::kAnsweredLate);
    return false;
  }
  LogOnce(absl::StrCat("server ", target, " unreachable: ", why,
                       closing ? "; the session is ending: its calls are not checked"
                               : "; retrying in the background"),
          common::LogLevel::kWarning);
  state_.store(LinkState::kUnreachable);
  return false;
}

bool Connection::Connect(bool closing) {
  if (!OpenChannel()) {
    // A server list or TLS material that cannot be used has said so (kUndeliverable); else
    // the servers did not resolve.
    if (state() != LinkState::kUndeliverable) state_.store(LinkState::kUnreachable);
    return false;
  }
  // The sender's back-off paces the attempts: gRPC's own, grown over earlier failures (up to
  // reconnect_max_ms), would let this attempt wait without dialling a server that is back.
  grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
  const std::string target = target_text_;
  if (!WaitForConnected(std::chrono::milliseconds(options_.connect_timeout_ms), closing)) {
    if (callbacks_.on_wait_over) callbacks_.on_wait_over();
    return AttemptFailed(target, closing || Closing());
  }
  auto live = std::make_unique<Live>();
  Live* raw = live.get();
  live->stream = std::make_unique<CheckStream>(
      channel_, [this, raw](grpc::ByteBuffer& bytes) { OnServerMessage(raw, bytes); },
      [this] {
        if (callbacks_.on_end) callbacks_.on_end();
      },
      static_cast<int>(options_.background_nice));
  const bool stopping = callbacks_.stopping && callbacks_.stopping();
  {
    absl::MutexLock lock(&mu_);
    cancellable_ = live->stream.get();
    if (stopping || cancelled_) live->stream->Cancel();
  }
  if (!Handshake(live)) return false;
  live_ = std::move(live);
  state_.store(LinkState::kConnected);
  last_error_.clear();
  return true;
}

grpc::Status Connection::Abandon(std::unique_ptr<Live>& c, bool cancel) {
  if (cancel) {
    c->stream->Cancel();
  } else {
    c->stream->WritesDone();
  }
  grpc::Status s = c->stream->Finish(absl::Seconds(3));
  {
    absl::MutexLock lock(&mu_);
    cancellable_ = nullptr;
  }
  c.reset();
  return s;
}

// The server's limits: the agent honours them (ServerInfo).
void Connection::AdoptServerLimits(const v1::ServerInfo& info) {
  ServerLimits& l = limits_;
  l.max_inline_bytes = std::min<uint64_t>(options_.max_inline_tensor_bytes,
                                          std::max<uint64_t>(info.max_message_bytes() / 4, 4096));
  l.max_tensor_bytes = info.max_tensor_bytes() > 0
                           ? std::min<uint64_t>(options_.max_tensor_bytes, info.max_tensor_bytes())
                           : options_.max_tensor_bytes;
  // Half the server's limit: room for the batch's field headers (a few bytes an item).
  l.max_batch_bytes =
      info.max_message_bytes() > 0 ? info.max_message_bytes() / 2 : uint64_t{1} << 20;
  l.accepts_batches = info.accepts_batches();
  l.accepted_dtypes.clear();
  for (int d : info.accepted_dtypes()) l.accepted_dtypes.push_back(d);
  // Equal payloads named again: a fresh table per stream, within the server's cap.
  const uint64_t keep = std::min<uint64_t>(options_.reuse_bytes, info.kept_blob_bytes());
  sent_.reset();
  if (keep > 0) sent_ = std::make_unique<SentPayloads>(keep);
}

bool Connection::Handshake(std::unique_ptr<Live>& c) {
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
    const grpc::Status s = Abandon(c, /*cancel=*/false);
    LogOnce(absl::StrCat("server ", target, " refused the stream: ", s.error_message(), " (code ",
                         static_cast<int>(s.error_code()), ")"),
            common::LogLevel::kError);
    // Refused for what this agent is (its rank, its version, its Hello): retrying will not
    // change that, so the end of the session does not wait for it.
    const grpc::StatusCode code = s.error_code();
    // (PERMISSION_DENIED, a rank the server does not check, is the pipeline's to report: it
    // stops the session's capture first; refused() says so.)
    // Any other refusal (UNIMPLEMENTED: something that speaks HTTP/2 but is no parity-server)
    // is this attempt failing: the end of the session does not wait for it either.
    if (code == grpc::StatusCode::PERMISSION_DENIED) {
      refused_ = s.error_message();
      state_.store(LinkState::kRefused);
    } else if (code == grpc::StatusCode::FAILED_PRECONDITION ||
               code == grpc::StatusCode::INVALID_ARGUMENT ||
               code == grpc::StatusCode::UNAUTHENTICATED) {
      state_.store(LinkState::kUndeliverable);
    } else {
      state_.store(LinkState::kUnreachable);
    }
    return false;
  }
  // crl.pem: a revoked server gets nothing but the Hello it has already read.
  if (crl_) {
    const std::string why = crl_->Revoked(c->stream->PeerCertificatePem());
    if (!why.empty()) {
      Abandon(c, /*cancel=*/true);
      LogOnce(absl::StrCat("refusing server ", target, ": its ", why, "; no call is sent to it"),
              common::LogLevel::kError);
      state_.store(LinkState::kUndeliverable);
      return false;
    }
  }
  const v1::ServerInfo& info = reply.server_info();
  // The address the call reached, known once the server has answered ("ipv4:10.0.0.5:59208":
  // the same for every rank of the host that reached it, whatever name each was given).
  peer_ = c->stream->Peer();
  if (peer_.empty() || peer_.find(',') != std::string::npos) peer_ = target;
  AdoptServerLimits(info);
  common::LogInfo(absl::StrCat("connected to ", target, " (server ", info.server_version(),
                               ", bench ", info.bench_device(), ", rank ", options_.hello.rank(),
                               ")"));
  return true;
}

bool Connection::Closing() const { return callbacks_.closing && callbacks_.closing(); }

bool Connection::WaitForConnected(std::chrono::milliseconds timeout, bool closing) {
  auto deadline = std::chrono::system_clock::now() + timeout;
  bool cut = false;  // the deadline was shortened when the session began to end
  for (;;) {
    if (!closing && Closing()) closing = true;
    if (closing && !cut && !options_.wait_for_server_at_exit) {
      // An attempt under way when the session began to end: a second more at most (a server
      // that has not answered by then is reported, not waited for: close() ends promptly).
      deadline = std::min(deadline, std::chrono::system_clock::now() + std::chrono::seconds(1));
      cut = true;
    }
    // Slices of at most 100 ms, so that a stop never waits out a whole connect timeout.
    const auto slice =
        std::min(deadline, std::chrono::system_clock::now() + std::chrono::milliseconds(100));
    if (channel_->WaitForConnected(slice)) return true;
    if (std::chrono::system_clock::now() >= deadline) return false;
    // Once the session is ending, an attempt that already failed (a refused port fails at
    // once) ends here, so that its reason is logged before the end gives up; before, the whole
    // connect timeout is waited (a server starting beside the training is found).
    if (closing && !options_.wait_for_server_at_exit &&
        channel_->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      return false;
    }
    if (callbacks_.stopping && callbacks_.stopping()) return false;
  }
}

// On a gRPC callback thread: must not block.
void Connection::OnServerMessage(Live* c, grpc::ByteBuffer& bytes) {
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
  if (m.has_replica()) {
    if (callbacks_.on_replica) callbacks_.on_replica(m.replica());
    return;
  }
  if (m.has_verdict()) {
    callbacks_.on_verdict(m.verdict());
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
      callbacks_.on_verdict(item.verdict());
      ++verdicts;
    }
  }
  if (verdicts > 0 && callbacks_.on_answered) callbacks_.on_answered(verdicts);
}

bool Connection::StreamDone() const { return live_ == nullptr || live_->stream->done(); }

bool Connection::Write(grpc::ByteBuffer bytes, bool more) {
  return live_ != nullptr && live_->stream->Write(std::move(bytes), more);
}

void Connection::Disconnect(bool quiet) {
  if (live_ == nullptr) return;
  live_->stream->WritesDone();
  // The server ends the stream after its last verdict; a wedged one is cancelled.
  const grpc::Status s = live_->stream->Finish(absl::Seconds(3));
  if (!s.ok() && !quiet) {
    common::LogWarning(
        absl::StrCat("stream to the server ended: ", s.error_message(), "; reconnecting"));
  }
  {
    absl::MutexLock lock(&mu_);
    cancellable_ = nullptr;
  }
  live_.reset();
  sent_.reset();
  state_.store(LinkState::kNotConnected);
}

void Connection::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (cancellable_ != nullptr) cancellable_->Cancel();
}

}  // namespace parity::agent
