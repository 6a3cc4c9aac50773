#include "agent/transport/call_encoder.h"

#include "parity/v1/parity.pb.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <optional>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/transport/call_wire.h"
#include "common/wire/fields.h"

namespace parity::agent {
namespace {

// One TensorChunk of blob `id`.
std::shared_ptr<v1::AgentMessage> Chunk(uint64_t id, uint64_t total, uint64_t offset,
                                        std::string data, bool keep) {
  auto m = std::make_shared<v1::AgentMessage>();
  v1::TensorChunk* c = m->mutable_chunk();
  c->set_blob_id(id);
  c->set_total_bytes(total);
  c->set_offset(offset);
  c->set_keep(keep && offset == 0);
  c->set_data(std::move(data));
  return m;
}

// Collects the payloads of tensors too large to inline, and names payloads sent before when the
// connection keeps them. The torch half's encoder reaches it through a parity_blob_sink.
class BlobCollector {
 public:
  BlobCollector(uint64_t* next_id, SentPayloads* sent, EncodedCall* out)
      : next_id_(next_id), sent_(sent), out_(out) {}

  parity_blob_sink AsSink() {
    parity_blob_sink sink;
    sink.ctx = this;
    sink.add_blob = [](void* ctx, const void* bytes, uint64_t size) {
      return static_cast<BlobCollector*>(ctx)->AddBlob(
          std::string_view(static_cast<const char*>(bytes), size));
    };
    sink.add_reusable = [](void* ctx, const void* bytes, uint64_t size) {
      return static_cast<BlobCollector*>(ctx)->AddReusable(
          std::string_view(static_cast<const char*>(bytes), size));
    };
    return sink;
  }

  // A payload the torch half sent before from bytes that cannot have changed: no hash, no
  // comparison; 0 when the table no longer keeps it.
  uint64_t AddKnown(uint64_t id, uint64_t size) {
    if (sent_ == nullptr) return 0;
    bool earlier = false;
    const std::optional<uint64_t> kept = sent_->FindById(id, size, &earlier);
    if (!kept) return 0;
    out_->reused_bytes += size;
    if (earlier && listed_.insert(*kept).second) out_->call.add_kept_blob_ids(*kept);
    return *kept;
  }

  uint64_t AddBlob(std::string_view bytes) {
    EncodedCall::Blob& blob = NewBlob(false);
    Slice(blob, bytes);
    return blob.id;
  }

  uint64_t AddReusable(std::string_view view) {
    const absl::string_view bytes(view.data(), view.size());
    const bool keepable = sent_ != nullptr && sent_->Keepable(bytes.size());
    uint64_t hash = 0;
    if (keepable) {
      hash = SentPayloads::Hash(bytes);
      bool earlier = false;
      if (std::optional<uint64_t> id = sent_->Find(bytes, hash, &earlier)) {
        out_->reused_bytes += bytes.size();
        if (earlier && listed_.insert(*id).second) out_->call.add_kept_blob_ids(*id);
        return *id;
      }
    }
    EncodedCall::Blob& blob = NewBlob(keepable);
    if (!keepable || bytes.size() <= kChunkBytes) {
      Slice(blob, view);
      // The table keeps the copy that is sent (not the snapshot, which goes back to the pool);
      // a chunk's bytes never change once made.
      if (keepable)
        sent_->Add(blob.id, blob.chunks.front()->chunk().data(), hash, blob.chunks.front());
    } else {
      auto payload = std::make_shared<const std::string>(view);
      sent_->Add(blob.id, *payload, hash, payload);
      Slice(blob, *payload);
    }
    return blob.id;
  }

 private:
  EncodedCall::Blob& NewBlob(bool keep) {
    out_->blobs.emplace_back();
    EncodedCall::Blob& blob = out_->blobs.back();
    blob.id = ++*next_id_;
    blob.keep = keep;
    return blob;
  }
  // `bytes` as chunks of kChunkBytes (copies).
  static void Slice(EncodedCall::Blob& blob, std::string_view bytes) {
    for (std::size_t off = 0; off < bytes.size() || off == 0; off += kChunkBytes) {
      blob.chunks.push_back(Chunk(blob.id, bytes.size(), off,
                                  std::string(bytes.substr(off, kChunkBytes)), blob.keep));
      if (bytes.empty()) break;
    }
  }

  uint64_t* next_id_;
  SentPayloads* sent_;
  EncodedCall* out_;
  std::set<uint64_t> listed_;
};

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

}  // namespace

EncodedCall& EncodedCall::operator=(EncodedCall&& other) noexcept {
  if (this == &other) return *this;
  ReleaseValues();
  call = std::move(other.call);
  values = other.values;
  other.values = parity_bytes{};
  blobs = std::move(other.blobs);
  release = std::move(other.release);
  reused_bytes = other.reused_bytes;
  with_data = other.with_data;
  return *this;
}

void EncodedCall::ReleaseValues() {
  if (values.release != nullptr) values.release(values.owner);
  values = parity_bytes{};
}

grpc::ByteBuffer EncodedCall::TakeMessage() {
  // AgentMessage{call = record + values}: the values' fields (inputs 12, outputs 13) follow the
  // record's in the ApiCall; protobuf takes fields in any order.
  std::string head;
  const std::string record = call.SerializeAsString();
  PutVarint((uint64_t{wire::kAgentMessageCall} << 3) | 2, &head);
  PutVarint(record.size() + values.size, &head);
  head += record;
  if (values.size == 0) {
    ReleaseValues();
    grpc::Slice slice(head);
    return grpc::ByteBuffer(&slice, 1);
  }
  grpc::Slice slices[2] = {grpc::Slice(head), grpc::Slice()};
  // The values go from the torch half's buffer; it is released when gRPC is done with it.
  auto* owned = new parity_bytes(values);
  values = parity_bytes{};
  slices[1] = grpc::Slice(
      const_cast<char*>(owned->data), owned->size,
      [](void* p) {
        auto* b = static_cast<parity_bytes*>(p);
        if (b->release != nullptr) b->release(b->owner);
        delete b;
      },
      owned);
  return grpc::ByteBuffer(slices, 2);
}

v1::ApiCall ToApiCall(CallRecord&& r) {
  v1::ApiCall c;
  common::IdentityToWire(std::move(r), &c);
  return c;
}

EncodedCall EncodeCall(CapturedCall& call, const CallEncoding& encoding, uint64_t* next_blob_id) {
  EncodedCall out;
  out.call = ToApiCall(std::move(call.meta));  // encoded once: a call is never sent twice
  if (!call.has_values) return out;            // a record only (its skip_reason says why)
  BlobCollector collector(next_blob_id, encoding.sent, &out);
  // Whatever ends the encoding early (an exception included) forgets this call's tentative
  // payloads: the table never names a blob that was not sent.
  struct AbortUnlessCommitted {
    SentPayloads* sent;
    bool committed = false;
    ~AbortUnlessCommitted() {
      if (sent != nullptr && !committed) sent->AbortCall();
    }
  } guard{encoding.sent};
  parity_encode_limits limits{};
  limits.size = sizeof(limits);
  limits.max_inline_tensor_bytes = encoding.max_inline_tensor_bytes;
  limits.max_tensor_bytes = encoding.max_tensor_bytes;
  limits.reuse_min_bytes = encoding.sent != nullptr ? kReuseMinBytes : 0;
  limits.checksum = encoding.checksum ? 1 : 0;
  limits.add_known = [](void* ctx, uint64_t id, uint64_t size) {
    return static_cast<BlobCollector*>(ctx)->AddKnown(id, size);
  };
  if (encoding.accepted_dtypes != nullptr) {
    limits.accepted_dtypes = encoding.accepted_dtypes->data();
    limits.accepted_dtype_count = encoding.accepted_dtypes->size();
  }
  const parity_blob_sink sink = collector.AsSink();
  char error[512] = {0};
  parity_bytes values{};
  const int code =
      call.values.encode != nullptr
          ? call.values.encode(call.values.ctx, &limits, &sink, &values, error, sizeof(error))
          : 13;
  out.values = values;
  if (code != 0) {
    // Still sent, without data, so the result files show the call and why it was not checked.
    out.ReleaseValues();
    out.call.clear_kept_blob_ids();
    out.call.set_skip_reason(absl::StrCat("the agent could not send this call: ",
                                          call.values.encode != nullptr ? error : "no encoder"));
    out.blobs.clear();
    out.reused_bytes = 0;
    out.with_data = false;
    return out;
  }
  if (encoding.sent != nullptr) {
    guard.committed = true;
    SentPayloads::Commit commit = encoding.sent->CommitCall();
    out.release = std::move(commit.release);
    for (uint64_t id : commit.unkept) {
      for (EncodedCall::Blob& b : out.blobs) {
        if (b.id != id) continue;
        b.keep = false;
        b.chunks.front()->mutable_chunk()->set_keep(false);  // not yet serialized
      }
    }
  }
  return out;
}

}  // namespace parity::agent
