#include "server/service/blob_assembler.h"

#include "parity/v1/parity.pb.h"

#include <new>
#include <utility>

#include "absl/strings/str_cat.h"

namespace parity::server {
namespace {

std::atomic<uint64_t> g_fail_growth_above{0};

// Appends a chunk's bytes to its blob: the blob grows as bytes arrive (never to the announced
// total at once, so an announcement costs nothing until the bytes are there).
void AppendToBlob(std::string& blob, absl::string_view bytes) {
  const uint64_t limit = g_fail_growth_above.load(std::memory_order_relaxed);
  if (limit != 0 && blob.size() + bytes.size() > limit) throw std::bad_alloc();
  blob.append(bytes.data(), bytes.size());
}

}  // namespace

void BlobAssembler::FailGrowthAboveForTesting(uint64_t bytes) { g_fail_growth_above.store(bytes); }

uint64_t BlobAssembler::OfferKept(uint64_t per_stream) {
  kept_cap_ = kept_budget_->TakeUpTo(per_stream);
  return kept_cap_;
}

void BlobAssembler::Close() {
  partial_->Give(pending_bytes_);  // blobs of no call
  pending_bytes_ = 0;
  kept_budget_->Give(kept_cap_);
  kept_cap_ = 0;
}

absl::Status BlobAssembler::OnChunk(const v1::TensorChunk& chunk) {
  if (chunk.total_bytes() > limits_.max_tensor_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chunked tensor ", chunk.blob_id(), ": total_bytes ", chunk.total_bytes(),
                     " exceeds max_tensor_bytes ", limits_.max_tensor_bytes));
  }
  if (kept_.count(chunk.blob_id()) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunked tensor ", chunk.blob_id(), ": this stream keeps a blob of that id ",
                     "(TensorChunk.keep); a new blob needs another id, or a BlobRelease first"));
  }
  if (chunk.keep() && chunk.offset() == 0) {
    if (kept_cap_ == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "chunked tensor ", chunk.blob_id(),
          ": TensorChunk.keep, but this server keeps no blobs (ServerInfo.kept_blob_bytes 0)"));
    }
    if (kept_bytes_ + chunk.total_bytes() > kept_cap_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("chunked tensor ", chunk.blob_id(), ": keeping its ", chunk.total_bytes(),
                       " bytes would hold ", kept_bytes_ + chunk.total_bytes(),
                       " bytes of kept blobs on this stream, over ServerInfo.kept_blob_bytes ",
                       kept_cap_, " (release blobs before keeping more)"));
    }
    keep_.push_back(chunk.blob_id());
  }
  const auto [total, first] = totals_.emplace(chunk.blob_id(), chunk.total_bytes());
  if (!first && total->second != chunk.total_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunked tensor ", chunk.blob_id(), ": total_bytes ", chunk.total_bytes(),
        " in this chunk, ", total->second, " in its first (it must be the same in every chunk)"));
  }
  std::string& blob = blobs_->blobs()[chunk.blob_id()];
  if (chunk.offset() != blob.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunked tensor ", chunk.blob_id(), ": chunk at offset ", chunk.offset(),
                     ", expected ", blob.size(), " (chunks must arrive in order)"));
  }
  if (chunk.offset() + chunk.data().size() > chunk.total_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunked tensor ", chunk.blob_id(), ": chunk ends at ",
        chunk.offset() + chunk.data().size(), ", past total_bytes ", chunk.total_bytes()));
  }
  const uint64_t n = chunk.data().size();
  if (pending_bytes_ + n > limits_.max_call_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("chunked tensors awaiting their call: ", pending_bytes_ + n,
                     " bytes exceed max_call_bytes ", limits_.max_call_bytes));
  }
  if (const uint64_t all = partial_->TryTake(n); all != 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "chunked tensors awaiting their calls on all streams would hold ", all,
        " bytes, over parity.max_partial_blob_bytes ", partial_->cap(), "; this stream ends"));
  }
  pending_bytes_ += n;  // counted in the server-wide total until the call arrives
  AppendToBlob(blob, chunk.data());
  return absl::OkStatus();
}

absl::Status BlobAssembler::OnRelease(const v1::BlobRelease& release) {
  for (uint64_t id : release.blob_ids()) {
    auto it = kept_.find(id);
    if (it == kept_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("BlobRelease names blob ", id,
                       ", which this stream does not keep (never kept, or "
                       "released already)"));
    }
    kept_bytes_ -= it->second->size();
    kept_.erase(it);  // calls that listed it hold their own share
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<BlobStore>> BlobAssembler::TakeForCall(
    uint64_t sequence, const std::vector<uint64_t>& listed) {
  // Chunks sent since the previous call belong to this one, and must all be complete.
  for (const auto& [id, total] : totals_) {
    const std::string* blob = blobs_->FindBlob(id);
    const uint64_t have = blob == nullptr ? 0 : blob->size();
    if (have != total) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunked tensor ", id, ": ", have, " of its ", total, " bytes arrived before call ",
          sequence, " (every chunk of a tensor comes before the call that uses it)"));
    }
  }
  std::shared_ptr<BlobStore> store = std::move(blobs_);
  blobs_ = std::make_shared<BlobStore>();
  if (absl::Status s = KeepMarked(*store); !s.ok()) return s;
  if (absl::Status s = AttachListed(listed, *store); !s.ok()) return s;
  totals_.clear();
  partial_->Give(pending_bytes_);  // now the work queue's bytes
  pending_bytes_ = 0;
  return store;
}

absl::Status BlobAssembler::KeepMarked(BlobStore& store) {
  for (uint64_t id : keep_) {
    auto it = store.blobs().find(id);
    if (it == store.blobs().end()) continue;  // TakeForCall found every blob complete
    if (kept_.count(id) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunked tensor ", id, ": kept twice before one call (TensorChunk.keep)"));
    }
    if (kept_bytes_ + it->second.size() > kept_cap_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("kept blobs on this stream would hold ", kept_bytes_ + it->second.size(),
                       " bytes, over ServerInfo.kept_blob_bytes ", kept_cap_,
                       " (release blobs before keeping more)"));
    }
    auto kept = std::make_shared<const std::string>(std::move(it->second));
    store.blobs().erase(it);
    kept_bytes_ += kept->size();
    store.kept()[id] = kept;
    kept_[id] = std::move(kept);
  }
  keep_.clear();
  return absl::OkStatus();
}

absl::Status BlobAssembler::AttachListed(const std::vector<uint64_t>& listed, BlobStore& store) {
  for (uint64_t id : listed) {
    auto it = kept_.find(id);
    if (it == kept_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ApiCall.kept_blob_ids names blob ", id,
                       ", which this stream does not keep (never kept, or released)"));
    }
    store.kept()[id] = it->second;
  }
  return absl::OkStatus();
}

}  // namespace parity::server
