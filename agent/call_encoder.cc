#include "agent/call_encoder.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/torch/value_codec.h"

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
// connection keeps them.
class BlobCollector : public common::BlobSink {
 public:
  BlobCollector(uint64_t* next_id, SentPayloads* sent, EncodedCall* out, v1::ApiCall* call)
      : next_id_(next_id), sent_(sent), out_(out), call_(call) {}
  uint64_t AddBlob(std::string payload) override {
    EncodedCall::Blob& blob = NewBlob(false);
    if (payload.size() <= kChunkBytes) {  // one chunk: moved, not copied
      const uint64_t total = payload.size();
      blob.chunks.push_back(Chunk(blob.id, total, 0, std::move(payload), false));
    } else {
      Slice(blob, payload);
    }
    return blob.id;
  }
  uint64_t AddReusable(absl::string_view bytes) override {
    const bool keepable = sent_ != nullptr && sent_->Keepable(bytes.size());
    uint64_t hash = 0;
    if (keepable) {
      hash = SentPayloads::Hash(bytes);
      bool earlier = false;
      if (std::optional<uint64_t> id = sent_->Find(bytes, hash, &earlier)) {
        out_->reused_bytes += bytes.size();
        if (earlier && listed_.insert(*id).second) call_->add_kept_blob_ids(*id);
        return *id;
      }
    }
    EncodedCall::Blob& blob = NewBlob(keepable);
    if (!keepable || bytes.size() <= kChunkBytes) {
      Slice(blob, bytes);
      // The table keeps the copy that is sent (not the snapshot, which goes back to the pool);
      // a chunk's bytes never change once made.
      if (keepable)
        sent_->Add(blob.id, blob.chunks.front()->chunk().data(), hash, blob.chunks.front());
    } else {
      auto payload = std::make_shared<const std::string>(bytes);
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
  static void Slice(EncodedCall::Blob& blob, absl::string_view bytes) {
    for (std::size_t off = 0; off < bytes.size(); off += kChunkBytes) {
      blob.chunks.push_back(Chunk(blob.id, bytes.size(), off,
                                  std::string(bytes.substr(off, kChunkBytes)), blob.keep));
    }
  }

  uint64_t* next_id_;
  SentPayloads* sent_;
  EncodedCall* out_;
  v1::ApiCall* call_;
  std::set<uint64_t> listed_;
};

// Waits, on this (the sender's) thread, for the call's device-side snapshots, then copies them
// to the host.
void CopyToHost(CapturedCall& call) {
  if (!call.device_ready) return;
  try {
    // The sender's stream on that device waits for the training stream's event; the blocking
    // copy to the host below then runs after the snapshots.
    const c10::Event& ready = *call.device_ready;
    c10::impl::VirtualGuardImpl impl(ready.device_type());
    ready.block(impl.getStream(c10::Device(ready.device_type(), ready.device_index())));
    for (auto* values : {&call.inputs, &call.outputs}) {
      for (c10::IValue& v : *values) v = ToHost(v);
    }
  } catch (const std::exception& e) {
    common::LogWarning(
        absl::StrCat("device copy failed for ", call.meta.op_name(), ": ", e.what()));
  }
  call.device_ready.reset();
}

}  // namespace

EncodedCall EncodeCall(CapturedCall& call, const CallEncoding& encoding, uint64_t* next_blob_id) {
  CopyToHost(call);
  EncodedCall out;
  out.message = std::make_shared<v1::AgentMessage>();
  v1::ApiCall* a = out.message->mutable_call();
  *a = call.meta;
  BlobCollector sink(next_blob_id, encoding.sent, &out, a);
  // Whatever ends the encoding early (an exception included) forgets this call's tentative
  // payloads: the table never names a blob that was not sent.
  struct AbortUnlessCommitted {
    SentPayloads* sent;
    bool committed = false;
    ~AbortUnlessCommitted() {
      if (sent != nullptr && !committed) sent->AbortCall();
    }
  } guard{encoding.sent};
  common::EncodeOptions opts;
  opts.max_inline_tensor_bytes = encoding.max_inline_tensor_bytes;
  opts.max_tensor_bytes = encoding.max_tensor_bytes;
  opts.blob_sink = &sink;
  opts.reuse_min_bytes = encoding.sent != nullptr ? kReuseMinBytes : 0;
  opts.compute_crc32c = encoding.checksum;
  opts.accepted_dtypes = encoding.accepted_dtypes;
  // The schema's argument types tell an int that is really a dtype, layout or memory format.
  const c10::FunctionSchema* schema = nullptr;
  auto handle = c10::Dispatcher::singleton().findSchema(
      c10::OperatorName(call.meta.op_name(), call.meta.overload()));
  if (handle) schema = &handle->schema();
  absl::Status s;
  for (std::size_t i = 0; i < call.inputs.size() && s.ok(); ++i) {
    const c10::Type* hint = schema && i < schema->arguments().size()
                                ? schema->arguments()[i].real_type().get()
                                : nullptr;
    s = common::EncodeValue(call.inputs[i], hint, opts, absl::StrCat("inputs[", i, "]"),
                            a->add_inputs());
  }
  for (std::size_t i = 0; i < call.outputs.size() && s.ok(); ++i) {
    s = common::EncodeValue(call.outputs[i], nullptr, opts, absl::StrCat("outputs[", i, "]"),
                            a->add_outputs());
  }
  if (!s.ok()) {
    // Still sent, without data, so the result files show the call and why it was not checked.
    a->clear_inputs();
    a->clear_outputs();
    a->clear_kept_blob_ids();
    a->set_skip_reason(absl::StrCat("the agent could not send this call: ", s.message()));
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
