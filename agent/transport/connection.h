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
#include "common/transport/tls.h"
#include "parity/v1/parity.pb.h"

namespace grpc {
class ByteBuffer;
class Channel;
class Status;
}  // namespace grpc

namespace parity::agent {

class CheckStream;
struct SenderOptions;

// What the server's ServerInfo allows, within the agent's own limits.
struct ServerLimits {
  uint64_t max_inline_bytes = 0;         // a larger tensor goes as a blob
  uint64_t max_tensor_bytes = 0;         // a larger tensor goes as statistics
  uint64_t max_batch_bytes = 1 << 20;    // a MessageBatch's size at most
  bool accepts_batches = false;          // ServerInfo.accepts_batches
  std::vector<int32_t> accepted_dtypes;  // the server's; empty: any
};

class Connection {
 public:
  struct Callbacks {
    std::function<void(const v1::Verdict&)> on_verdict;  // each verdict (a gRPC thread)
    std::function<void(uint64_t)> on_answered;           // after a message's verdicts
    std::function<void()> on_end;                        // the stream ended (a gRPC thread)
    std::function<bool()> stopping;                      // the sender is stopping
    // The session is ending (close(), the process's exit): an attempt already under way when
    // it began gives up once it has failed, and waits at most a second more otherwise.
    std::function<bool()> closing;
  };
  Connection(const SenderOptions& options, AgentCounters& counters, Callbacks callbacks);
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
  // The payloads this stream's server keeps; null when either side keeps none.
  SentPayloads* sent() { return sent_.get(); }
  // The last attempt failed in a way retrying cannot fix (TLS material, a refused Hello).
  bool undeliverable() const { return undeliverable_.load(); }
  // The last attempt failed (none since succeeded).
  bool unreachable() const { return unreachable_.load(); }
  // The last attempt failed, yet a connection of the agent's own made right after it reached
  // the server and (TLS) completed a handshake: a server that was restarting or too busy to
  // answer in time. The next attempt is made soon, not after the grown back-off.
  bool answered_afterwards() const { return answered_afterwards_.load(); }
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

  const SenderOptions& options_;
  AgentCounters& counters_;
  const Callbacks callbacks_;

  std::shared_ptr<grpc::Channel> channel_;
  std::string target_text_;      // the servers, for log lines
  ServerEndpoint first_server_;  // the first configured server (TLS diagnostics)
  std::shared_ptr<const common::RevocationList> crl_;  // crl.pem: servers refused
  std::unique_ptr<Live> live_;
  std::unique_ptr<SentPayloads> sent_;
  ServerLimits limits_;
  bool ever_connected_ = false;
  std::string last_error_;
  std::string refused_;
  std::atomic<bool> undeliverable_{false};
  std::atomic<bool> unreachable_{false};
  std::atomic<bool> answered_afterwards_{false};

  mutable absl::Mutex mu_;
  CheckStream* cancellable_ ABSL_GUARDED_BY(mu_) = nullptr;  // the stream Cancel() ends
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace parity::agent
