// A captured call made into what travels: its values encoded by the torch half (parity_values:
// the device snapshots copied to the host, the values written as parity.v1.Value wire bytes),
// its large tensors set apart as blobs to be chunked, equal payloads named again. Runs on the
// sender thread, never on a training thread. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "agent/transport/captured_call.h"
#include "agent/transport/sent_payloads.h"
#include "parity/v1/parity.pb.h"

namespace grpc {
class ByteBuffer;
}  // namespace grpc

namespace parity::agent {

// Tensors of this many bytes or more are sent once per connection and named again when equal
// (parity.reuse_bytes; agent/transport/sent_payloads.h); smaller ones are not worth a table entry.
inline constexpr uint64_t kReuseMinBytes = 16 << 10;
// A blob travels in TensorChunks of at most this many bytes.
inline constexpr std::size_t kChunkBytes = 1 << 20;

struct CallEncoding {
  uint64_t max_inline_tensor_bytes = uint64_t{4} << 20;   // larger: a blob (TensorChunks)
  uint64_t max_tensor_bytes = uint64_t{256} << 20;        // larger: statistics only
  bool checksum = false;                                  // CRC-32C of every payload
  const std::vector<int32_t>* accepted_dtypes = nullptr;  // the server's; null: any
  SentPayloads* sent = nullptr;  // the connection's kept payloads; null: every tensor is sent
};

class EncodedCall {
 public:
  EncodedCall() = default;
  EncodedCall(EncodedCall&& other) noexcept { *this = std::move(other); }
  EncodedCall& operator=(EncodedCall&& other) noexcept;
  ~EncodedCall() { ReleaseValues(); }

  // The AgentMessage carrying the ApiCall: the record below with the values' bytes in it (sent
  // from the torch half's buffer, not copied). Call once.
  grpc::ByteBuffer TakeMessage();

  // The call's record: every field but inputs and outputs (kept_blob_ids and, for a call that
  // could not be encoded, skip_reason included).
  v1::ApiCall call;
  parity_bytes values{};  // the ApiCall's inputs/outputs fields, as the torch half wrote them
  struct Blob {
    uint64_t id = 0;
    bool keep = false;  // TensorChunk.keep, set on the first chunk
    // Its TensorChunks, ready to write. A kept blob's bytes are shared with the connection's
    // SentPayloads (one chunk's message, or a copy of several chunks' bytes), which compares
    // later tensors with them.
    std::vector<std::shared_ptr<v1::AgentMessage>> chunks;
  };
  std::vector<Blob> blobs;  // in order
  // Kept blobs the server may forget, released before this call's blobs are sent.
  std::vector<uint64_t> release;
  // Tensor bytes not sent because an equal payload was sent before (a kept blob was named).
  uint64_t reused_bytes = 0;
  // False when a value could not be encoded: the call then goes without values, and its
  // skip_reason says why (the server answers SKIP).
  bool with_data = true;

  // Frees the values' bytes now (a call sent without them).
  void ReleaseValues();
};

// Encodes `call` (once: its record is moved into the ApiCall); blob ids come from `*next_blob_id`
// (incremented). Never throws for a value it cannot encode (see with_data); may throw
// std::bad_alloc.
EncodedCall EncodeCall(CapturedCall& call, const CallEncoding& encoding, uint64_t* next_blob_id);

// The ApiCall of a captured call's record, without its values: written on the sender thread,
// taking the record's strings (a call is encoded once; EncodeCall leaves its record empty).
v1::ApiCall ToApiCall(CallRecord&& record);

}  // namespace parity::agent
