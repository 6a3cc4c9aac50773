// The agent's connection to its server: the channel (one server, or several by rank:
// agent/transport/server_list.h), TLS, the Check stream, the Hello/ServerInfo handshake and the
// server's limits, the diagnosis of a failed attempt, and the verdicts as they arrive. The pipeline
// (agent/transport/sender.h) decides when to connect (its back-off) and what to write. Used by the
// sender thread, but for Cancel() (any thread) and the callbacks (gRPC's threads).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/transport/counters.h"
#include "agent/transport/sent_payloads.h"
#include "agent/transport/server_list.h"
#include "common/base/log.h"
#include "common/config/config.h"
#include "common/transport/tls.h"
#include "parity/v1/parity.pb.h"

namespace grpc {
class ByteBuffer;
class Channel;
class Status;
}  // namespace grpc

namespace parity::agent {

class CheckStream;
// What the link runs with, and only that: its keys (common::LinkKeys: TLS, timeouts, the
// payload limits the agent asks for, as the configuration read them), the server's address and
// this process's Hello. Owned by the Connection; made from the parsed configuration by
// LinkOptions::From.
struct LinkOptions : common::LinkKeys {
  static LinkOptions From(const common::AgentConfig& config);  // the Hello left empty

  std::string host;   // tensor.host: one server or several, comma-separated
  int64_t port = -1;  // tensor.port
  std::string tls_path;
  v1::Hello hello;  // this process: sent at every connection (protocol version filled in)
  // Which of several servers this link prefers, and in which order it fails over
  // (agent/transport/server_list.h): by the Hello's rank when negative; a replica route's
  // group (docs/replicas.md#several-servers) otherwise, the same on every rank of the group.
  int64_t spread = -1;
};

// What the server's ServerInfo allows, within the agent's own limits.
struct ServerLimits {
  uint64_t max_inline_bytes = 0;         // a larger tensor goes as a blob
  uint64_t max_tensor_bytes = 0;         // a larger tensor goes as statistics
  uint64_t max_batch_bytes = 1 << 20;    // a MessageBatch's size at most
  bool accepts_batches = false;          // ServerInfo.accepts_batches
  std::vector<int32_t> accepted_dtypes;  // the server's; empty: any
};

// Where the link to the server stands, as the last connection attempt (or the stream's end) left
// it. One state, set at the end of each attempt: the sender paces its attempts by it and the end
// of the session decides by it whether waiting can help.
enum class LinkState {
  kNotConnected,  // no attempt has ended yet, or the stream ended and none was made since
  kConnected,     // a stream is up: handshake done, the server's limits adopted
  kUnreachable,   // the last attempt failed, no server answered it (retried with back-off)
  // The last attempt timed out, yet a connection of the agent's own made right after reached
  // the server (and, with TLS, got a gRPC server's first bytes): a server restarting or too busy
  // to finish in time. The next attempt comes soon, not after the grown back-off.
  kAnsweredLate,
  // The last attempt failed in a way retrying cannot fix until something changes (a bad server
  // list, unusable TLS material, a Hello refused for what this agent is, a revoked server): still
  // retried, but the end of the session does not wait for it.
  kUndeliverable,
  kRefused,  // the server refused this agent's rank (PERMISSION_DENIED): capture stops
};

// The agent's link to its server (one object for the whole session): the channel, the stream
// of each connection, the server's limits and the payloads the server keeps, and the link's state.
// The sender (sender.h) only queues, batches and paces attempts.
class Connection {
 public:
  struct Callbacks {
    std::function<void(const v1::Verdict&)> on_verdict;         // each verdict (a gRPC thread)
    std::function<void(const v1::ReplicaVerdict&)> on_replica;  // each (a gRPC thread)
    std::function<void(uint64_t)> on_answered;                  // after a message's verdicts
    std::function<void()> on_end;                               // the stream ended (a gRPC thread)
    std::function<bool()> stopping;                             // the sender is stopping
    // The session is ending (close(), the process's exit): an attempt already under way when
    // it began gives up once it has failed, and waits at most a second more otherwise.
    std::function<bool()> closing;
    // The attempt's wait for the channel ran out (connect_timeout_ms) without a connection, on
    // the sender thread, before the failure is diagnosed (which may take as long again): calls
    // waiting for the session's first attempt stop waiting here, within connect_timeout_ms.
    std::function<void()> on_wait_over;
  };
  Connection(LinkOptions options, AgentCounters& counters, Callbacks callbacks);
  ~Connection();

  // Opens the channel (once), waits for it, starts the stream and shakes hands. False with the
  // reason logged (once per reason); `closing`: the session is ending (a failed attempt is
  // diagnosed within a second and not waited for).
  bool Connect(bool closing);
  bool connected() const { return live_ != nullptr; }
  // The stream ended (the server finished it, or it failed).
  bool StreamDone() const;
  // Writes one message; `more`: another follows at once. False once the stream failed.
  bool Write(grpc::ByteBuffer bytes, bool more);
  // Half-closes, waits for the server to finish (3 s, then cancels) and drops the stream.
  // `quiet`: the session is ending (a failed status is not logged).
  void Disconnect(bool quiet);
  // Ends the stream now, from any thread (a wedged server must not hold the training's exit).
  void Cancel();

  const ServerLimits& limits() const { return limits_; }
  // How many server addresses the configured list resolved to; 0 before the first attempt
  // resolved it. Sender thread only.
  std::size_t server_count() const { return server_count_; }
  // The address of the server this stream reached ("ipv4:10.0.0.5:59208"; the configured target
  // where gRPC does not say). Sender thread only.
  const std::string& peer() const { return peer_; }
  // The payloads this stream's server keeps; null when either side keeps none.
  SentPayloads* sent() { return sent_.get(); }
  LinkState state() const { return state_.load(); }
  bool undeliverable() const { return state() == LinkState::kUndeliverable; }
  // The last attempt failed for want of an answering server (or could not be made at all).
  bool unreachable() const {
    return state() == LinkState::kUnreachable || state() == LinkState::kUndeliverable;
  }
  bool answered_afterwards() const { return state() == LinkState::kAnsweredLate; }
  // Whether the first configured server accepts a TCP connection within `budget` (any thread):
  // at the end of a session, whether a server that failed an earlier attempt is back.
  bool AcceptsTcp(std::chrono::milliseconds budget) const;
  // Why the server refused this agent (PERMISSION_DENIED: its rank is not in the server's
  // rank_list), "" if it did not. Sender thread only.
  const std::string& refused() const { return refused_; }

 private:
  struct Live;

  bool OpenChannel();
  bool WaitForConnected(std::chrono::milliseconds timeout, bool closing);
  // `closing`: the session began to end before or during the attempt.
  bool AttemptFailed(const std::string& target, bool closing);
  bool Closing() const;  // callbacks_.closing, when set
  // The limits of ServerInfo, and a fresh table of payloads sent, for a new stream.
  void AdoptServerLimits(const v1::ServerInfo& info);
  bool Handshake(std::unique_ptr<Live>& live);
  grpc::Status Abandon(std::unique_ptr<Live>& live, bool cancel);
  void OnServerMessage(Live* live, grpc::ByteBuffer& bytes);
  void LogOnce(const std::string& message, common::LogLevel level);

  const LinkOptions options_;
  AgentCounters& counters_;
  const Callbacks callbacks_;

  std::shared_ptr<grpc::Channel> channel_;
  std::string target_text_;      // the servers, for log lines
  std::string peer_;             // the server the last handshake reached
  ServerEndpoint first_server_;  // the first configured server (TLS diagnostics)
  std::shared_ptr<const common::RevocationList> crl_;  // crl.pem: servers refused
  std::unique_ptr<Live> live_;
  std::unique_ptr<SentPayloads> sent_;
  ServerLimits limits_;
  bool ever_connected_ = false;
  std::size_t server_count_ = 0;
  std::string last_error_;
  std::string refused_;
  std::atomic<LinkState> state_{LinkState::kNotConnected};

  mutable absl::Mutex mu_;
  CheckStream* cancellable_ ABSL_GUARDED_BY(mu_) = nullptr;  // the stream Cancel() ends
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace parity::agent
