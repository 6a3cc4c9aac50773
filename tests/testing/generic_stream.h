// The server side of one generic bidirectional stream, for servers written by hand in tests and
// benchmarks (an ack-only floor, a server that sends garbage): reads every message, lets the
// subclass answer, writes one message at a time, and finishes OK once the client has half-closed
// and nothing is being written.
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <mutex>
#include <optional>

namespace parity::testing {

class GenericStreamReactor : public grpc::ServerGenericBidiReactor {
 public:
  GenericStreamReactor() { StartRead(&in_); }

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override { delete this; }

 protected:
  // Both are called under the reactor's lock, one at a time. OnMessage gets each message read
  // (and may clear it); NextWrite, whenever no write is outstanding, gives what to write next.
  virtual void OnMessage(grpc::ByteBuffer& message) = 0;
  virtual std::optional<grpc::ByteBuffer> NextWrite() = 0;

 private:
  void WriteNextLocked();
  void MaybeFinishLocked();

  std::mutex mu_;
  grpc::ByteBuffer in_, out_;
  bool reading_ = true, writing_ = false, finished_ = false;
};

}  // namespace parity::testing
