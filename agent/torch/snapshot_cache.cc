#include "agent/torch/snapshot_cache.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/SmallVector.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "agent/torch/tensor_bits.h"
#include "common/torch/ivalue_walk.h"

namespace parity::agent {
namespace {

// What makes two tensors the same values: their memory and how they read it. Sizes and strides
// inline up to 6 dimensions: a lookup allocates nothing.
struct Identity {
  const c10::StorageImpl* storage = nullptr;
  int64_t offset = 0;
  c10::SmallVector<int64_t, 6> sizes, strides;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  bool operator==(const Identity& o) const {
    return storage == o.storage && offset == o.offset && dtype == o.dtype && device == o.device &&
           sizes == o.sizes && strides == o.strides;
  }
};

struct IdentityHash {
  std::size_t operator()(const Identity& k) const {
    std::size_t h = std::hash<const void*>()(k.storage) ^ (static_cast<std::size_t>(k.offset) << 1);
    for (int64_t s : k.sizes) h = h * 1000003 ^ static_cast<std::size_t>(s);
    return h ^ static_cast<std::size_t>(k.dtype);
  }
};

struct Entry {
  explicit Entry(c10::weak_intrusive_ptr<c10::StorageImpl> storage) : alive(std::move(storage)) {}
  // The storage itself, weakly: a storage freed and another allocated at its address is not the
  // same tensor (lock() fails once it is gone).
  c10::weak_intrusive_ptr<c10::StorageImpl> alive;
  int64_t version = 0;
  at::Tensor snapshot;
  uint64_t bytes = 0;
  std::list<Identity>::iterator lru;
};

class Cache {
 public:
  Cache() {
    spare_entries_.reserve(kMaxSpareNodes);
    spare_storages_.reserve(kMaxSpareNodes);
  }

  // Host: the snapshot only when every bit of `t` still equals it. Device: the earlier snapshot,
  // for the device to compare (no hit is counted: the sender decides).
  at::Tensor Find(const at::Tensor& t) {
    if (!Cacheable(t)) return {};
    const Identity id = IdentityOf(t);
    std::lock_guard<std::mutex> lock(mu_);
    if (max_bytes_ == 0) return {};
    auto it = entries_.find(id);
    if (it == entries_.end()) return {};
    Entry& e = it->second;
    const c10::intrusive_ptr<c10::StorageImpl> storage = e.alive.lock();
    if (storage.get() != id.storage || e.version != t._version()) {
      Erase(it);  // written as far as the version counter says: a new snapshot replaces it
      return {};
    }
    if (t.device().is_cpu()) {
      // The proof: a whole comparison (a write no hook or counter saw is found here; a sample
      // of the elements would miss one between them). Under the lock: the entry stays put.
      stats_.compared_bytes += e.bytes;
      if (!SameBits(e.snapshot, t)) {
        ++stats_.changed;
        Erase(it);
        return {};
      }
      ++stats_.hits;
      stats_.hit_bytes += e.bytes;
    }
    lru_.splice(lru_.end(), lru_, e.lru);
    return e.snapshot;
  }

  at::Tensor Adopt(const at::Tensor& snapshot, const at::Tensor& earlier) {
    std::lock_guard<std::mutex> lock(mu_);
    at::Tensor host = FindHost(earlier);
    if (!host.defined() || max_bytes_ == 0 || !snapshot.has_storage()) return host;
    const uint64_t bytes = static_cast<uint64_t>(host.numel()) * host.element_size();
    ++stats_.host_hits;
    stats_.host_bytes += bytes;
    KeepHost(snapshot, host, bytes);
    return host;
  }

  void NoteChanged() {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.changed;
  }

  void Remember(const at::Tensor& t, const at::Tensor& snapshot) {
    if (!Cacheable(t)) return;
    Identity id = IdentityOf(t);
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    if (max_bytes_ == 0 || bytes > max_bytes_ / 4) return;
    if (auto it = entries_.find(id); it != entries_.end()) Erase(it);
    c10::weak_intrusive_ptr<c10::StorageImpl> alive(
        c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(t.storage().unsafeGetStorageImpl()));
    EraseDeadOldest();
    Insert(std::move(id), std::move(alive), t._version(), snapshot, bytes);
    holds_any_.store(true, std::memory_order_relaxed);
    stats_.held_bytes += bytes;
    Trim();
  }

  at::Tensor HostCopy(const at::Tensor& snapshot) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (at::Tensor host = FindHost(snapshot); host.defined()) {
        ++stats_.host_hits;
        stats_.host_bytes += static_cast<uint64_t>(host.numel()) * host.element_size();
        return host;
      }
    }
    at::Tensor host = snapshot.to(at::kCPU);  // outside the lock: it waits for the device
    const uint64_t bytes = static_cast<uint64_t>(host.numel()) * host.element_size();
    std::lock_guard<std::mutex> lock(mu_);
    if (max_bytes_ == 0 || bytes < kSnapshotCacheMinBytes || bytes > max_bytes_ / 4 ||
        !snapshot.has_storage()) {
      return host;
    }
    KeepHost(snapshot, host, bytes);
    return host;
  }

  void Forget(const at::Tensor& t) {
    if (!t.defined() || !t.has_storage()) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_storage_.find(t.storage().unsafeGetStorageImpl());
    if (it == by_storage_.end()) return;
    const std::vector<Identity> ids = it->second;  // Erase edits the list
    for (const Identity& id : ids) {
      if (auto e = entries_.find(id); e != entries_.end()) {
        Erase(e);
        ++stats_.forgotten;
      }
    }
  }

  uint64_t SentBlob(const at::Tensor& host) {
    if (!host.defined() || !host.has_storage()) return 0;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sent_.find(host.storage().unsafeGetStorageImpl());
    if (it == sent_.end()) return 0;
    if (it->second.alive.lock().get() != it->first) {
      sent_.erase(it);
      return 0;
    }
    ++stats_.blobs_named;
    return it->second.id;
  }

  void RememberBlob(const at::Tensor& host, uint64_t id) {
    if (!host.defined() || !host.has_storage() || id == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (max_bytes_ == 0) return;
    if (sent_.size() >= kMaxSentBlobs) sent_.clear();  // ids of snapshots long gone, mostly
    const c10::StorageImpl* key = host.storage().unsafeGetStorageImpl();
    sent_.erase(key);
    sent_.emplace(key, SentBlobEntry{c10::weak_intrusive_ptr<c10::StorageImpl>(
                                         c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(
                                             host.storage().unsafeGetStorageImpl())),
                                     id});
  }

  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    sent_.clear();
    while (!lru_.empty()) Erase(entries_.find(lru_.front()));
    while (!host_lru_.empty()) EraseHost(host_lru_.front());
  }

  void Configure(uint64_t max_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    max_bytes_ = max_bytes;
    Trim();
  }

  // Without the lock: a hint for the hook's every call (a snapshot remembered meanwhile is of a
  // tensor this call does not write, or this thread would have remembered it).
  bool HoldsAny() const { return holds_any_.load(std::memory_order_relaxed); }

  SnapshotCacheStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  static bool Cacheable(const at::Tensor& t) {
    return t.defined() && t.layout() == at::kStrided && !t.is_inference() && t.has_storage() &&
           !t.is_conj() && !t.is_neg() &&
           static_cast<uint64_t>(t.numel()) * t.element_size() >= kSnapshotCacheMinBytes;
  }

  static Identity IdentityOf(const at::Tensor& t) {
    Identity id;
    id.storage = t.storage().unsafeGetStorageImpl();
    id.offset = t.storage_offset();
    id.sizes.assign(t.sizes().begin(), t.sizes().end());
    id.strides.assign(t.strides().begin(), t.strides().end());
    id.dtype = t.scalar_type();
    id.device = t.device();
    return id;
  }

  // `host` as the host copy of device snapshot `snapshot` (kept while that storage lives).
  void KeepHost(const at::Tensor& snapshot, const at::Tensor& host, uint64_t bytes) {
    const c10::StorageImpl* key = snapshot.storage().unsafeGetStorageImpl();
    if (hosts_.count(key) != 0) return;
    HostEntry h(c10::weak_intrusive_ptr<c10::StorageImpl>(
        c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(
            snapshot.storage().unsafeGetStorageImpl())));
    h.host = host;
    h.bytes = bytes;
    h.lru = host_lru_.insert(host_lru_.end(), key);
    hosts_.emplace(key, std::move(h));
    host_held_ += bytes;
    while (host_held_ > max_bytes_ && !host_lru_.empty()) EraseHost(host_lru_.front());
  }

  // The host copy made of a device snapshot that is still alive (its storage not freed and
  // reused); undefined if none.
  at::Tensor FindHost(const at::Tensor& snapshot) {
    if (!snapshot.defined() || !snapshot.has_storage()) return {};
    auto it = hosts_.find(snapshot.storage().unsafeGetStorageImpl());
    if (it == hosts_.end()) return {};
    if (it->second.alive.lock().get() != it->first || it->second.host.sizes() != snapshot.sizes()) {
      EraseHost(it->first);
      return {};
    }
    host_lru_.splice(host_lru_.end(), host_lru_, it->second.lru);
    return it->second.host;
  }

  void EraseHost(const c10::StorageImpl* key) {
    auto it = hosts_.find(key);
    if (it == hosts_.end()) return;
    host_held_ -= it->second.bytes;
    host_lru_.erase(it->second.lru);
    hosts_.erase(it);
  }

  // A new entry, in nodes Erase let go when it has some (no allocation).
  void Insert(Identity id, c10::weak_intrusive_ptr<c10::StorageImpl> alive, int64_t version,
              const at::Tensor& snapshot, uint64_t bytes) {
    std::list<Identity>::iterator lru;
    if (!spare_lru_.empty()) {
      lru_.splice(lru_.end(), spare_lru_, spare_lru_.begin());
      lru = std::prev(lru_.end());
      *lru = id;
    } else {
      lru = lru_.insert(lru_.end(), id);
    }
    auto s = by_storage_.find(id.storage);
    if (s == by_storage_.end() && !spare_storages_.empty()) {
      auto node = std::move(spare_storages_.back());
      spare_storages_.pop_back();
      node.key() = id.storage;
      s = by_storage_.insert(std::move(node)).position;  // its vector empty, its capacity kept
    } else if (s == by_storage_.end()) {
      s = by_storage_.emplace(id.storage, std::vector<Identity>()).first;
    }
    s->second.push_back(id);
    if (spare_entries_.empty()) {
      Entry e(std::move(alive));
      e.version = version;
      e.snapshot = snapshot;
      e.bytes = bytes;
      e.lru = lru;
      entries_.emplace(std::move(id), std::move(e));
      return;
    }
    auto node = std::move(spare_entries_.back());
    spare_entries_.pop_back();
    node.key() = std::move(id);
    Entry& e = node.mapped();
    e.alive = std::move(alive);
    e.version = version;
    e.snapshot = snapshot;
    e.bytes = bytes;
    e.lru = lru;
    entries_.insert(std::move(node));
  }

  // Lets the entry go; its nodes are kept for Insert (up to kMaxSpareNodes of each kind).
  void Erase(std::unordered_map<Identity, Entry, IdentityHash>::iterator it) {
    stats_.held_bytes -= it->second.bytes;
    if (auto s = by_storage_.find(it->first.storage); s != by_storage_.end()) {
      std::vector<Identity>& ids = s->second;
      ids.erase(std::remove(ids.begin(), ids.end(), it->first), ids.end());
      if (ids.empty()) {
        auto node = by_storage_.extract(s);
        if (spare_storages_.size() < kMaxSpareNodes) spare_storages_.push_back(std::move(node));
      }
    }
    if (spare_lru_.size() < kMaxSpareNodes) {
      spare_lru_.splice(spare_lru_.end(), lru_, it->second.lru);
    } else {
      lru_.erase(it->second.lru);
    }
    auto node = entries_.extract(it);
    node.mapped().snapshot = at::Tensor();  // the snapshot's buffer goes back now
    node.mapped().alive.reset();
    if (spare_entries_.size() < kMaxSpareNodes) spare_entries_.push_back(std::move(node));
    if (entries_.empty()) holds_any_.store(false, std::memory_order_relaxed);
  }

  // The oldest entries whose storage is gone (an activation of a step before: freed after its
  // backward) can never be found again: up to two are let go a Remember, so that their snapshots'
  // buffers go back to the pool, and their nodes are reused, instead of waiting for the cap.
  void EraseDeadOldest() {
    for (int i = 0; i < 2 && !lru_.empty(); ++i) {
      auto it = entries_.find(lru_.front());
      if (it == entries_.end() || !it->second.alive.expired()) return;
      Erase(it);
    }
  }

  void Trim() {
    while (stats_.held_bytes > max_bytes_ && !lru_.empty()) Erase(entries_.find(lru_.front()));
    while (host_held_ > max_bytes_ && !host_lru_.empty()) EraseHost(host_lru_.front());
  }

  std::mutex mu_;
  std::atomic<bool> holds_any_{false};  // entries_ is not empty
  uint64_t max_bytes_ = uint64_t{128} << 20;
  std::unordered_map<Identity, Entry, IdentityHash> entries_;
  // Host copies of device snapshots, by the snapshot's storage (held weakly: a call that still
  // holds the snapshot finds its copy even after the cache let the snapshot go).
  struct HostEntry {
    explicit HostEntry(c10::weak_intrusive_ptr<c10::StorageImpl> storage)
        : alive(std::move(storage)) {}
    c10::weak_intrusive_ptr<c10::StorageImpl> alive;
    at::Tensor host;
    uint64_t bytes = 0;
    std::list<const c10::StorageImpl*>::iterator lru;
  };
  std::unordered_map<const c10::StorageImpl*, HostEntry> hosts_;
  // The blob ids host snapshots were sent under, by the snapshot's storage (held weakly).
  struct SentBlobEntry {
    c10::weak_intrusive_ptr<c10::StorageImpl> alive;
    uint64_t id = 0;
  };
  static constexpr std::size_t kMaxSentBlobs = 1 << 16;
  std::unordered_map<const c10::StorageImpl*, SentBlobEntry> sent_;
  std::list<const c10::StorageImpl*> host_lru_;
  uint64_t host_held_ = 0;
  // The identities over each storage: a write through any view forgets them all.
  std::unordered_map<const c10::StorageImpl*, std::vector<Identity>> by_storage_;
  std::list<Identity> lru_;  // least recently used first
  // Nodes Erase let go, for Insert: remembering a snapshot in place of one let go (an activation
  // of this step for last step's) allocates nothing. Bounded; reserved once.
  static constexpr std::size_t kMaxSpareNodes = 64;
  std::vector<std::unordered_map<Identity, Entry, IdentityHash>::node_type> spare_entries_;
  std::vector<std::unordered_map<const c10::StorageImpl*, std::vector<Identity>>::node_type>
      spare_storages_;
  std::list<Identity> spare_lru_;
  SnapshotCacheStats stats_;
};

Cache& TheCache() {
  static Cache* cache = new Cache();  // outlives every snapshot (never destroyed)
  return *cache;
}

}  // namespace

at::Tensor CachedSnapshot(const at::Tensor& t) {
  return t.device().is_cpu() ? TheCache().Find(t) : at::Tensor();
}
at::Tensor EarlierDeviceSnapshot(const at::Tensor& t) {
  return t.device().is_cpu() ? at::Tensor() : TheCache().Find(t);
}
at::Tensor AdoptHostCopy(const at::Tensor& snapshot, const at::Tensor& earlier) {
  return TheCache().Adopt(snapshot, earlier);
}
void NoteDeviceSnapshotChanged() { TheCache().NoteChanged(); }
void RememberSnapshot(const at::Tensor& t, const at::Tensor& snapshot) {
  TheCache().Remember(t, snapshot);
}
at::Tensor HostCopyOf(const at::Tensor& snapshot) { return TheCache().HostCopy(snapshot); }
void ForgetSnapshotsOf(const at::Tensor& t) { TheCache().Forget(t); }
uint64_t SentBlobOf(const at::Tensor& host_snapshot) { return TheCache().SentBlob(host_snapshot); }
void RememberSentBlob(const at::Tensor& host_snapshot, uint64_t blob_id) {
  TheCache().RememberBlob(host_snapshot, blob_id);
}
void ClearSnapshotCache() { TheCache().Clear(); }

bool SnapshotCacheHoldsAny() { return TheCache().HoldsAny(); }

void ForgetWrittenArguments(const c10::OperatorName& op, const c10::FunctionSchema* schema,
                            c10::ArrayRef<const c10::IValue> inputs) {
  const auto forget = [](const c10::IValue& v) {
    common::ForEachLeaf(v, [](const c10::IValue& leaf) {
      if (leaf.isTensor()) ForgetSnapshotsOf(leaf.toTensor());
    });
  };
  if (schema == nullptr) {
    const auto handle = c10::Dispatcher::singleton().findSchema(op);
    if (handle) schema = &handle->schema();  // a registered op's schema outlives the call
  }
  if (schema == nullptr || op.name.rfind("c10d::", 0) == 0) {
    for (const c10::IValue& v : inputs) forget(v);
    return;
  }
  const auto& args = schema->arguments();
  for (std::size_t i = 0; i < inputs.size() && i < args.size(); ++i) {
    if (args[i].alias_info() != nullptr && args[i].alias_info()->isWrite()) forget(inputs[i]);
  }
}
void ConfigureSnapshotCache(uint64_t max_bytes) { TheCache().Configure(max_bytes); }
SnapshotCacheStats GetSnapshotCacheStats() { return TheCache().Stats(); }

}  // namespace parity::agent
