// The blobs one call may name, as the replay reads them (common::BlobSource): a plain store the
// stream's BlobAssembler (blob_assembler.h) fills and the worker reads. No gRPC, no proto.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/torch/value_codec.h"

namespace parity::server {

// The blobs one call may name: those reassembled since the previous call, and the kept blobs of
// the stream it listed (ApiCall.kept_blob_ids) or kept itself, shared with the stream's table
// (immutable once kept).
class BlobStore : public common::BlobSource {
 public:
  const std::string* FindBlob(uint64_t blob_id) const override {
    if (auto it = blobs_.find(blob_id); it != blobs_.end()) return &it->second;
    if (auto it = kept_.find(blob_id); it != kept_.end()) return it->second.get();
    return nullptr;
  }
  std::map<uint64_t, std::string>& blobs() { return blobs_; }
  std::map<uint64_t, std::shared_ptr<const std::string>>& kept() { return kept_; }
  uint64_t bytes() const;  // of the call's own blobs (kept ones are counted by their stream)

 private:
  std::map<uint64_t, std::string> blobs_;
  std::map<uint64_t, std::shared_ptr<const std::string>> kept_;
};

}  // namespace parity::server
