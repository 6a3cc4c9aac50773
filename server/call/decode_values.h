// The one reader of a call's values in its message: the inputs and the device's outputs decoded
// into libtorch values (common/torch/value_codec.h), every size validated before allocating. The
// replay (server/replay/stages.h: DecodeCall) fits them to the operator's schema; nothing past
// this file reads the message's values. Uses libtorch types: its own target (parity_call_values),
// apart from the rest of server/call/, which is torch-free.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/wire/blob_source.h"
#include "common/wire/fields.h"
#include "common/wire/limits.h"
#include "common/wire/tensor_stats.h"
#include "server/call/server_call.h"

namespace parity::server {

// How one device output arrived: decoded (its value in MessageValues::outputs), a tensor sent as
// statistics only (judged by the dtype, shape and statistics the agent sent in its place), or a
// value holding such a tensor that cannot be decoded here (a list, say). `why`: the decoder's
// words, for the last two.
struct OutputForm {
  enum class Kind { kDecoded, kStatsOnly, kUndecoded };
  Kind kind = Kind::kDecoded;
  std::string why;
  // kStatsOnly: what stands for the tensor.
  wire::DType dtype = wire::kDTypeUnspecified;
  std::vector<int64_t> shape;
  common::TensorStatsValues stats;
  bool decoded() const { return kind == Kind::kDecoded; }
};

struct MessageValues {
  std::vector<c10::IValue> inputs;      // as the call sent them (not yet fitted to a schema)
  std::vector<c10::IValue> outputs;     // the device's; None where not decoded
  std::vector<OutputForm> output_form;  // per output of the call
  // Whether every tensor argument was contiguous in the training (its original strides, when
  // sent, those of a contiguous tensor of its shape).
  bool inputs_contiguous = true;
};

// INVALID_ARGUMENT or RESOURCE_EXHAUSTED: the call is rejected; FAILED_PRECONDITION: an input was
// sent as statistics only, so the call cannot be replayed (SKIP). An output that cannot be
// decoded is no error: its OutputForm says why. `pinned_inputs`: inputs and outputs go to
// page-locked host memory (a CUDA bench copies them asynchronously).
absl::StatusOr<MessageValues> DecodeValues(const ServerCall& call,
                                           const common::DecodeLimits& limits,
                                           const common::BlobSource* blobs, bool pinned_inputs);

}  // namespace parity::server
