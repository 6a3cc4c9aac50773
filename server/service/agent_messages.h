// What the Check stream's session (stream_session.h) needs to know of the agent's messages before
// (or instead of) parsing them: the kind, sequence and kept blobs of an ApiCall read off its bytes,
// and the rules of Hello.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "parity/v1/parity.pb.h"
#include "server/service/message_bytes.h"

namespace parity::server {

// What the session reads of a serialized AgentMessage without parsing it: its kind, from the
// first tag of a message that holds exactly one length-delimited field spanning all its bytes
// (what every protobuf serializer writes for a oneof; else kind 0, and the message is parsed
// whole), and for an ApiCall its phase and sequence (the tensors are skipped over, not copied).
struct Peek {
  int kind = 0;
  v1::Phase phase = v1::PHASE_UNSPECIFIED;
  uint64_t sequence = 0;
  std::vector<uint64_t> kept_blob_ids;  // ApiCall.kept_blob_ids
  bool well_formed = false;             // every field of the ApiCall was read or skipped cleanly
};
Peek PeekMessage(MessageBytes& message);

// The items of a serialized AgentMessage holding a MessageBatch (PeekMessage's kind kBatch), each
// a view of the same slices (no copy), in order. INVALID_ARGUMENT when the batch's bytes
// are malformed (a field that is not a length-delimited item is skipped, as a parser would);
// RESOURCE_EXHAUSTED, before reading further, at its common::kMaxBatchItems + 1st item.
absl::StatusOr<std::vector<MessageBytes>> SplitBatch(MessageBytes& message);

// The status that ends a stream at message `index` (0-based) of `bytes` bytes that did not parse.
absl::Status NotAMessage(uint64_t index, std::size_t bytes);

// Longest string a Hello field may hold (run_id, hostname, versions, device type, digest).
inline constexpr std::size_t kMaxHelloStringBytes = 256;

// The rules a Hello must follow beyond its protocol version: 0 <= rank < world_size, local_rank
// not negative, every string under kMaxHelloStringBytes. INVALID_ARGUMENT naming the field.
absl::Status ValidateHello(const v1::Hello& hello);

}  // namespace parity::server
