// Where a decoder finds a tensor's bytes that came apart from its message (TensorChunks,
// reassembled by the server's stream): looked up by blob id. Torch- and protobuf-free.
#pragma once

#include <cstdint>
#include <string>

namespace parity::common {

class BlobSource {
 public:
  virtual ~BlobSource() = default;
  // The blob's bytes; nullptr when no blob has this id.
  virtual const std::string* FindBlob(uint64_t blob_id) const = 0;
};

}  // namespace parity::common
