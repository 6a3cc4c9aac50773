#include "agent/transport/sent_payloads.h"

#include <cstring>

#include "absl/hash/hash.h"
#include "absl/types/span.h"

namespace parity::agent {

// A hash of a sample of the bytes: the whole of a small payload; of a larger one its size, its
// first and last KiB and 32 windows of 64 bytes spread over it. Reading all of every tensor
// would cost as much as the copy it saves; equal payloads have equal samples, and a candidate
// is compared in full before it is named, so a shared sample costs one memcmp, never a wrong
// reference.
uint64_t SentPayloads::Hash(absl::string_view bytes) {
  constexpr std::size_t kWhole = 4096, kEdge = 1024, kWindows = 32, kWindow = 64;
  if (bytes.size() <= kWhole) return absl::HashOf(bytes);
  absl::string_view windows[kWindows];
  const std::size_t stride = (bytes.size() - kWindow) / (kWindows - 1);
  for (std::size_t i = 0; i < kWindows; ++i) windows[i] = bytes.substr(i * stride, kWindow);
  return absl::HashOf(bytes.size(), bytes.substr(0, kEdge), bytes.substr(bytes.size() - kEdge),
                      absl::MakeSpan(windows));
}

std::optional<uint64_t> SentPayloads::Find(absl::string_view bytes, uint64_t hash,
                                           bool* from_earlier_call) {
  auto [begin, end] = by_hash_.equal_range(hash);
  int compared = 0;
  for (auto it = begin; it != end && compared < kMaxCompared; ++it) {
    Lru::iterator e = it->second;
    ++compared;
    if (e->bytes.size() != bytes.size() ||
        std::memcmp(e->bytes.data(), bytes.data(), bytes.size()) != 0) {
      continue;  // a hash collision: only equal bytes are named again
    }
    *from_earlier_call = !e->tentative;
    e->last_call = call_;
    lru_.splice(lru_.end(), lru_, e);  // most recently used last
    return e->id;
  }
  return std::nullopt;
}

std::optional<uint64_t> SentPayloads::FindById(uint64_t id, uint64_t size,
                                               bool* from_earlier_call) {
  auto it = by_id_.find(id);
  if (it == by_id_.end() || it->second->bytes.size() != size) return std::nullopt;
  Lru::iterator e = it->second;
  *from_earlier_call = !e->tentative;
  e->last_call = call_;
  lru_.splice(lru_.end(), lru_, e);
  return e->id;
}

void SentPayloads::Add(uint64_t id, absl::string_view bytes, uint64_t hash,
                       std::shared_ptr<const void> owner) {
  Entry e;
  e.id = id;
  e.bytes = bytes;
  e.owner = std::move(owner);
  e.hash = hash;
  e.tentative = true;
  e.last_call = call_;
  Lru::iterator it = lru_.insert(lru_.end(), std::move(e));
  by_id_[id] = it;
  by_hash_.emplace(it->hash, it);
  added_.push_back(it);
  bytes_ += bytes.size();
}

void SentPayloads::Forget(Lru::iterator it) {
  auto [begin, end] = by_hash_.equal_range(it->hash);
  for (auto h = begin; h != end; ++h) {
    if (h->second == it) {
      by_hash_.erase(h);
      break;
    }
  }
  by_id_.erase(it->id);
  bytes_ -= it->bytes.size();
  lru_.erase(it);
}

SentPayloads::Commit SentPayloads::CommitCall() {
  Commit out;
  // Earlier calls' payloads this call does not use, least recently used first.
  for (auto it = lru_.begin(); it != lru_.end() && bytes_ > max_bytes_;) {
    auto next = std::next(it);
    if (!it->tentative && it->last_call != call_) {
      out.release.push_back(it->id);
      Forget(it);
    }
    it = next;
  }
  // Still over: this call's own payloads, newest first, go without keep.
  while (!added_.empty() && bytes_ > max_bytes_) {
    out.unkept.push_back(added_.back()->id);
    Forget(added_.back());
    added_.pop_back();
  }
  for (Lru::iterator it : added_) it->tentative = false;
  added_.clear();
  ++call_;
  return out;
}

void SentPayloads::AbortCall() {
  for (Lru::iterator it : added_) Forget(it);
  added_.clear();
  ++call_;
}

}  // namespace parity::agent
