// The chunked tensors of one agent stream (TensorChunk, BlobRelease, ApiCall.kept_blob_ids):
// reassembled in order, held until the call that uses them arrives, and the blobs marked keep
// kept for later calls of the stream, within the limits of the protocol and two server-wide
// budgets. Private to server/service/; its rules and messages are the ones parity.proto states.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/wire/limits.h"
#include "parity/v1/parity.pb.h"
#include "server/service/blob_store.h"
#include "server/service/byte_budget.h"

namespace parity::server {

// One stream's reading side: reactions only, one at a time (no lock).
class BlobAssembler {
 public:
  // `partial` holds the bytes of chunked tensors whose call has not arrived
  // (parity.max_partial_blob_bytes); `kept` the kept-blob bytes offered to the open streams.
  // Both must outlive the assembler.
  BlobAssembler(const common::DecodeLimits& limits, ByteBudget* partial, ByteBudget* kept)
      : limits_(limits), partial_(partial), kept_budget_(kept) {}

  // At Hello: what this stream may keep (ServerInfo.kept_blob_bytes), up to `per_stream`
  // within what the server-wide budget leaves. Returns the offer.
  uint64_t OfferKept(uint64_t per_stream);
  absl::Status OnChunk(const v1::TensorChunk& chunk);
  absl::Status OnRelease(const v1::BlobRelease& release);
  // The blobs of the call `sequence` that arrives now: every chunk sent since the previous call
  // complete, those marked keep moved to the stream's kept blobs, and the kept blobs `listed`
  // attached. Their bytes leave the partial budget (the work queue counts them from now on).
  absl::StatusOr<std::shared_ptr<BlobStore>> TakeForCall(uint64_t sequence,
                                                         const std::vector<uint64_t>& listed);
  // At the end of the stream: gives back what it holds of both budgets.
  void Close();

  // From now on, growing a chunked tensor past `bytes` throws std::bad_alloc, as a real
  // allocation failure would (0 = never). Process-wide.
  static void FailGrowthAboveForTesting(uint64_t bytes);

 private:
  absl::Status KeepMarked(BlobStore& store);
  absl::Status AttachListed(const std::vector<uint64_t>& listed, BlobStore& store);

  const common::DecodeLimits limits_;
  ByteBudget* const partial_;
  ByteBudget* const kept_budget_;
  std::shared_ptr<BlobStore> blobs_ = std::make_shared<BlobStore>();
  std::map<uint64_t, uint64_t> totals_;  // total_bytes of each blob of the coming call
  uint64_t pending_bytes_ = 0;           // bytes in blobs_, also in partial_
  std::vector<uint64_t> keep_;           // blobs of the coming call to keep (TensorChunk.keep)
  // The stream's kept blobs (at most kept_cap_ together); calls hold shares.
  std::map<uint64_t, std::shared_ptr<const std::string>> kept_;
  uint64_t kept_bytes_ = 0;
  uint64_t kept_cap_ = 0;  // offered at Hello, given back at Close
};

}  // namespace parity::server
