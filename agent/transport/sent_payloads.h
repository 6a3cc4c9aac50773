// The tensor payloads one connection has sent with TensorChunk.keep, so that an equal payload is
// named again (its blob id) instead of sent again. In a training step most bytes the agent
// captures are bytes it captured moments before: an op's output is the next op's input, a weight
// is read by the forward and both backward matmuls. Equality is decided byte for byte
// (memcmp against the copy of the payload the agent sent, which it keeps), never by a hash
// alone; the hash only finds the candidates.
//
// Mirrors the server's kept blobs: at most `max_bytes` together (ServerInfo.kept_blob_bytes, or
// less), least recently used ones released first. One call's payloads are added tentatively and
// committed once the whole call encoded (or forgotten when it did not), so that the table never
// names a blob the server did not get. One per connection, used by the sender thread only.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace parity::agent {

class SentPayloads {
 public:
  explicit SentPayloads(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // The table's hash of `bytes` (a sample of them), for a caller that looks a payload up and
  // then adds it: one hash for both.
  static uint64_t Hash(absl::string_view bytes);
  // The id of a kept payload equal to `bytes`, marked used by the current call; nullopt if none.
  // `from_earlier_call`: the payload was kept by an earlier call (ApiCall.kept_blob_ids lists
  // it), not by the current one. `hash` is Hash(bytes).
  std::optional<uint64_t> Find(absl::string_view bytes, uint64_t hash, bool* from_earlier_call);
  std::optional<uint64_t> Find(absl::string_view bytes, bool* from_earlier_call) {
    return Find(bytes, Hash(bytes), from_earlier_call);
  }
  // The kept payload `id`, if the table still holds it with `size` bytes, marked used by the
  // current call; for a caller that knows its bytes equal that payload's (no comparison).
  std::optional<uint64_t> FindById(uint64_t id, uint64_t size, bool* from_earlier_call);
  // Whether a payload of `size` bytes may be kept at all (at most a quarter of the cap: a larger
  // one would evict most of the table for one tensor).
  bool Keepable(uint64_t size) const { return size <= max_bytes_ / 4; }
  // Adds a payload the current call sends with keep, tentatively. `bytes` must stay valid and
  // unchanged while `owner` lives; `hash` is Hash(bytes).
  void Add(uint64_t id, absl::string_view bytes, uint64_t hash, std::shared_ptr<const void> owner);
  void Add(uint64_t id, absl::string_view bytes, std::shared_ptr<const void> owner) {
    Add(id, bytes, Hash(bytes), std::move(owner));
  }

  struct Commit {
    std::vector<uint64_t> release;  // kept blobs to release before this call's chunks
    std::vector<uint64_t> unkept;   // this call's blobs that must go without keep after all
  };
  // The current call encoded: its payloads become kept; the least recently used payloads of
  // earlier calls are released until the total fits. When this call's own payloads alone do not
  // fit, its newest are sent without keep (`unkept`) and forgotten.
  Commit CommitCall();
  // The current call could not be encoded: its tentative payloads are forgotten.
  void AbortCall();

  uint64_t bytes() const { return bytes_; }
  std::size_t size() const { return by_id_.size(); }

 private:
  struct Entry {
    uint64_t id = 0;
    absl::string_view bytes;
    std::shared_ptr<const void> owner;
    uint64_t hash = 0;
    bool tentative = false;
    uint64_t last_call = 0;
  };
  using Lru = std::list<Entry>;  // least recently used first
  void Forget(Lru::iterator it);

  // Candidates of one hash compared at most (payloads that share a sample but differ elsewhere,
  // e.g. zero-filled tensors of one size): past that, a payload is sent again.
  static constexpr int kMaxCompared = 4;
  const uint64_t max_bytes_;
  uint64_t bytes_ = 0;  // kept and tentative payloads
  uint64_t call_ = 1;   // the current call's number
  Lru lru_;
  std::unordered_map<uint64_t, Lru::iterator> by_id_;
  std::unordered_multimap<uint64_t, Lru::iterator> by_hash_;
  std::vector<Lru::iterator> added_;  // the current call's tentative payloads, in order
};

}  // namespace parity::agent
