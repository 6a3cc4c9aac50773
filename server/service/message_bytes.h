// One serialized message of the Check stream as gRPC read it or will write it: its slices, not
// copied. The session (stream_session.h) and the agent messages' readers (agent_messages.h) take
// and give these, so their APIs name no gRPC type; the conversions to and from gRPC's own buffer
// are server/service/grpc_bytes.h's, for the reactor and the codec. A copy is a second view of
// the same slices (the bytes are not copied).
#pragma once

#include <cstddef>
#include <memory>

namespace grpc {
class ByteBuffer;
}  // namespace grpc

namespace parity::server {

class MessageBytes {
 public:
  MessageBytes();  // no bytes
  ~MessageBytes();
  MessageBytes(MessageBytes&& other) noexcept;
  MessageBytes& operator=(MessageBytes&& other) noexcept;
  MessageBytes(const MessageBytes& other);
  MessageBytes& operator=(const MessageBytes& other);

  std::size_t size() const;  // in bytes
  void Clear();              // gives the slices back

 private:
  friend MessageBytes FromGrpc(grpc::ByteBuffer&& buffer);
  friend grpc::ByteBuffer& AsGrpc(MessageBytes& bytes);
  std::unique_ptr<grpc::ByteBuffer> buffer_;  // null: no bytes
};

}  // namespace parity::server
