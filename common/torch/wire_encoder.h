// c10::IValue -> parity.v1.Value in wire bytes, with no protobuf or abseil header: the agent's
// torch half encodes with it (docs/design.md#two-halves), and common/torch/value_codec.h's
// EncodeValue is it, parsed into a v1::Value. One encoder.
//
// Callers include libtorch themselves; this header forward-declares what it names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/wire/proto_writer.h"

namespace c10 {
struct IValue;
struct Type;
}  // namespace c10
namespace at {
class Tensor;
}  // namespace at

namespace parity::common {

// Receives payloads of tensors too large to inline; returns the blob id the Tensor will refer to.
class BlobSink {
 public:
  virtual ~BlobSink() = default;
  // A payload to send as a blob; `bytes` are valid only during the call (the sink copies them).
  virtual uint64_t AddBlob(std::string_view bytes) = 0;
  // A payload the sink may send once and name again for equal bytes (EncodeOptions.
  // reuse_min_bytes); valid only during the call. Default: AddBlob. `source`: the host tensor
  // whose own bytes these are (any strides; they were made contiguous), which the sink may
  // remember the id by (KnownReusable); undefined when the payload is not its bytes (a resolved
  // conjugate, a device tensor's copy).
  virtual uint64_t AddReusable(std::string_view bytes, const at::Tensor& source) {
    (void)source;
    return AddBlob(bytes);
  }
  // The id a payload of `source` (a host tensor, any strides) was added under before and that
  // the sink still holds, to name it again without reading its bytes or making it contiguous;
  // 0 when there is none (the default), and the encoder adds it.
  virtual uint64_t KnownReusable(const at::Tensor& source) {
    (void)source;
    return 0;
  }
};

struct EncodeOptions {
  // Tensors with a larger payload go to `blob_sink` (DATA_FORM_CHUNKED) if there is one.
  uint64_t max_inline_tensor_bytes = uint64_t{16} << 20;
  // Tensors with a larger payload, or larger than the inline limit without a sink, are sent as
  // statistics only (DATA_FORM_STATS_ONLY).
  uint64_t max_tensor_bytes = uint64_t{1} << 30;
  BlobSink* blob_sink = nullptr;
  // Tensors of this many payload bytes or more, up to max_tensor_bytes, go to the sink's
  // AddReusable (DATA_FORM_CHUNKED) whatever the inline limit; 0: never.
  uint64_t reuse_min_bytes = 0;
  bool compute_crc32c = false;
  uint32_t max_depth = 8;
  // The dtypes the receiver accepts (ServerInfo.accepted_dtypes, parity.v1.DType numbers); null:
  // any. A tensor of another dtype is UNIMPLEMENTED, naming it.
  const std::vector<int32_t>* accepted_dtypes = nullptr;
};

// An encoding failure: a status code (abseil's numbers: 3 INVALID_ARGUMENT, 12 UNIMPLEMENTED,
// 13 INTERNAL) and a message naming the value's path. code 0: success.
struct EncodeError {
  int code = 0;
  std::string message;
  bool ok() const { return code == 0; }
};

// Writes `value` as a parity.v1.Value into `out` (an empty message). `type_hint` (a schema
// argument's real_type(), may be null) lets an int that is really a ScalarType, Layout or
// MemoryFormat travel as such. Tensors are copied to host memory and made contiguous;
// conjugate/negative views are resolved; inline payloads are borrowed from host tensors that
// `keep_alive` holds until `out` is serialized. Values that cannot be sent (generators, objects,
// sparse or quantized tensors) give UNIMPLEMENTED naming `path`. Thread-safe; throws nothing
// (libtorch errors become INTERNAL) but std::bad_alloc.
EncodeError EncodeValueWire(const c10::IValue& value, const c10::Type* type_hint,
                            const EncodeOptions& options, std::string_view path, wire::Message* out,
                            std::vector<c10::IValue>* keep_alive);

}  // namespace parity::common
