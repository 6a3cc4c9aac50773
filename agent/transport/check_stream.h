// One Check stream of the agent, on gRPC's callback API (a ClientBidiReactor), with the blocking
// face the sender thread wants: Write waits while a message is already queued behind the one in
// flight, so the sender thread is held (and the bounded queue fills, and the drop/block policy
// applies) exactly when HTTP/2 flow control holds the stream. Messages from the server arrive on
// gRPC's callback threads: the first (ServerInfo) waits for AwaitFirst, every later one goes to
// `on_message`.
//
// Why a reactor and not the synchronous ClientReaderWriter the agent used before: with one
// message queued behind the write in flight, the sender encodes the next call while the previous
// one is being sent, and no reader thread of our own is needed. tests/bench/transport_bench
// measures both clients doing the same work side by side ("sync client", "reactor client" and
// their paired ratio); the reactor moved calls faster there (docs/design.md).
//
// The sender thread starts operations from outside gRPC's reactions (Write, WritesDone, the read
// after AwaitFirst), so the stream holds itself open (gRPC's AddHold) until it starts no more:
// without a hold gRPC may end a stream whose server has gone, destroying its call object before
// OnDone says so, and a write started in that window calls into a destroyed object ("pure
// virtual method called", seen once in ~10 runs of a test whose server dies under a writing
// agent). The hold goes when the stream's reading ends (the server finished it or it failed),
// at WritesDone, Finish, Cancel and destruction; no operation starts from outside after that.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace parity::agent {

class CheckStream : private grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Called for every message after the first, on a gRPC callback thread: must not block. An
  // exception it throws cancels the stream.
  using OnMessage = std::function<void(grpc::ByteBuffer&)>;

  // Starts the Check call on `channel`. `on_end`, if set, runs once when the stream ends, on a
  // gRPC callback thread (must not block). Each gRPC thread that runs a reaction of this stream
  // has its nice value raised by `background_nice`, once (parity.background_nice).
  CheckStream(std::shared_ptr<grpc::ChannelInterface> channel, OnMessage on_message,
              std::function<void()> on_end = nullptr, int background_nice = 0);
  // Cancels the stream unless it has ended, and waits for gRPC's last callback.
  ~CheckStream() override;
  CheckStream(const CheckStream&) = delete;
  CheckStream& operator=(const CheckStream&) = delete;

  // Sends `message`; `more`: another write follows at once (gRPC's buffer hint). Returns at once
  // when no write is in flight, else queues it behind that write, waiting first while another
  // is already queued. False once the stream has ended or a write failed (the message is not
  // sent). Thread-compatible: one writer.
  bool Write(grpc::ByteBuffer message, bool more);
  // The server's first message, waiting until it comes or the stream ends (nullopt); after it,
  // messages go to `on_message`. Call once.
  std::optional<grpc::ByteBuffer> AwaitFirst();
  // Half-closes once every write has gone out (or the stream has ended).
  void WritesDone();
  // Waits for the stream's status at most `timeout`, then cancels it and waits for that.
  grpc::Status Finish(absl::Duration timeout);
  // The server's certificate (PEM) as the TLS handshake gave it; "" in plaintext.
  std::string PeerCertificatePem() const;
  // The server's address as gRPC names it ("ipv4:10.0.0.5:59208"); "" before it connected.
  std::string Peer() const { return context_.peer(); }
  // Ends the stream now (any thread): blocked writes and waits return, and from the moment this
  // returns no Write succeeds and no queued write starts (gRPC's cancellation itself is
  // asynchronous; the stream's reactions follow it).
  void Cancel();
  // The stream has ended (the server finished it, it failed, or it was cancelled).
  bool done() const;
  // A Write is waiting for the write in flight (flow control holds the stream).
  bool WriteWaitingForTesting() const;

 private:
  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;
  void StartNextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the stream's hold, once (outside mu_: gRPC may finish the stream then).
  void ReleaseHold() ABSL_LOCKS_EXCLUDED(mu_);

  grpc::ClientContext context_;
  const OnMessage on_message_;
  const std::function<void()> on_end_;
  const int background_nice_;
  grpc::ByteBuffer in_;  // the read in flight: touched only by gRPC between StartRead and its end

  mutable absl::Mutex mu_;
  grpc::ByteBuffer out_ ABSL_GUARDED_BY(mu_);  // the write in flight
  std::optional<std::pair<grpc::ByteBuffer, bool>> queued_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_writes_ ABSL_GUARDED_BY(mu_) = 0;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // Cancel() was called
  std::optional<grpc::ByteBuffer> first_ ABSL_GUARDED_BY(mu_);
  bool first_taken_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool held_ ABSL_GUARDED_BY(mu_) = true;  // the hold is on: operations may start from outside
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::agent
