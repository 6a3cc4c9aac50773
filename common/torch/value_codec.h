// c10::IValue <-> parity.v1.Value, both ways. The only place libtorch values meet the wire format.
//
// Callers include libtorch themselves; this header forward-declares what it names so that code
// passing values through (transport, server queues) does not pay for libtorch's headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "common/torch/wire_encoder.h"
#include "common/wire/blob_source.h"
#include "common/wire/limits.h"
#include "parity/v1/parity.pb.h"

namespace c10 {
struct IValue;
struct Type;
}  // namespace c10

namespace parity::common {

// Encodes `value` into `out`: common/torch/wire_encoder.h's EncodeValueWire, parsed (one encoder).
// `type_hint` (a schema argument's real_type(), may be null) lets an int that is really a
// ScalarType, Layout or MemoryFormat travel as such. Tensors are copied to host memory and made
// contiguous; conjugate/negative views are resolved. Values that cannot be sent (generators,
// objects, sparse or quantized tensors) give UNIMPLEMENTED naming `path`. Thread-safe; may throw
// nothing (libtorch errors become statuses).
absl::Status EncodeValue(const c10::IValue& value, const c10::Type* type_hint,
                         const EncodeOptions& options, absl::string_view path, v1::Value* out);

// Decodes values of one call. Validates every size against `limits` before allocating; the
// per-call byte cap spans all values decoded by one Decoder. Not thread-safe (one per call).
class ValueDecoder {
 public:
  explicit ValueDecoder(const DecodeLimits& limits, const BlobSource* blobs = nullptr)
      : limits_(limits), blobs_(blobs) {}

  // Decodes `value` into `*out`. Errors are INVALID_ARGUMENT (malformed) or RESOURCE_EXHAUSTED
  // (over a cap) and name `path` and the offending numbers; FAILED_PRECONDITION for tensors sent
  // as statistics only (they cannot be materialised); RESOURCE_EXHAUSTED with
  // kOutOfMemoryDecoding when an allocation failed, INTERNAL for another libtorch error after
  // validation.
  absl::Status Decode(const v1::Value& value, absl::string_view path, c10::IValue* out);

  // Tensor payload bytes decoded so far.
  uint64_t bytes_decoded() const { return bytes_decoded_; }

  // Tensors decoded from now on go to page-locked host memory (libtorch's caching host
  // allocator), so their copy to a CUDA bench can be asynchronous. Needs a libtorch with CUDA.
  void set_pinned(bool pinned) { pinned_ = pinned; }

 private:
  absl::Status DecodeAt(const v1::Value& value, std::string& path, uint32_t depth,
                        c10::IValue* out);
  absl::Status DecodeTensor(const v1::Tensor& t, const std::string& path, c10::IValue* out);
  absl::Status DecodeList(const v1::ValueList& list, std::string& path, uint32_t depth,
                          c10::IValue* out);

  DecodeLimits limits_;
  const BlobSource* blobs_;
  uint64_t bytes_decoded_ = 0;
  bool pinned_ = false;
};

}  // namespace parity::common
