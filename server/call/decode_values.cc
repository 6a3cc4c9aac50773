#include "server/call/decode_values.h"

#include "absl/strings/str_cat.h"
#include "common/torch/torch_pch.h"
#include "common/torch/value_codec.h"
#include "parity/v1/parity.pb.h"

namespace parity::server {
namespace {

// Whether `t` was contiguous in the training: its original strides (when sent) those of a
// contiguous tensor of its shape, dimensions of size 1 ignored.
bool Contiguous(const v1::Tensor& t) {
  if (t.original_strides_size() == 0) return true;
  if (t.original_strides_size() != t.shape_size()) return false;
  int64_t expected = 1;
  for (int d = t.shape_size() - 1; d >= 0; --d) {
    if (t.shape(d) != 1 && t.original_strides(d) != expected) return false;
    expected *= t.shape(d);
  }
  return true;
}

// An output that did not decode (FAILED_PRECONDITION: statistics only somewhere in it): a
// tensor sent as statistics only, with what stands for it, or a value that holds one.
OutputForm NotDecoded(const v1::Value& value, const absl::Status& why) {
  OutputForm form;
  form.why = std::string(why.message());
  if (!value.has_tensor() || value.tensor().form() != v1::DATA_FORM_STATS_ONLY) {
    form.kind = OutputForm::Kind::kUndecoded;
    return form;
  }
  const v1::Tensor& t = value.tensor();
  form.kind = OutputForm::Kind::kStatsOnly;
  form.dtype = static_cast<wire::DType>(t.dtype());
  form.shape.assign(t.shape().begin(), t.shape().end());
  const v1::TensorStats& s = t.stats();
  form.stats.min = s.min();
  form.stats.max = s.max();
  form.stats.mean = s.mean();
  form.stats.l2_norm = s.l2_norm();
  form.stats.nan_count = s.nan_count();
  form.stats.inf_count = s.inf_count();
  uint64_t numel = 1;
  for (int64_t d : t.shape()) numel *= static_cast<uint64_t>(d);
  form.stats.any_finite = s.nan_count() + s.inf_count() < numel;
  return form;
}

}  // namespace

absl::StatusOr<MessageValues> DecodeValues(const ServerCall& call,
                                           const common::DecodeLimits& limits,
                                           const common::BlobSource* blobs, bool pinned_inputs) {
  const v1::ApiCall& message = call.message;
  common::ValueDecoder decoder(limits, blobs);
  decoder.set_pinned(pinned_inputs);
  MessageValues v;
  v.inputs.resize(message.inputs_size());
  for (int i = 0; i < message.inputs_size(); ++i) {
    absl::Status s =
        decoder.Decode(message.inputs(i), absl::StrCat("inputs[", i, "]"), &v.inputs[i]);
    if (s.code() == absl::StatusCode::kFailedPrecondition) {
      return absl::FailedPreconditionError(
          absl::StrCat(s.message(), ": the call cannot be replayed without it"));
    }
    if (!s.ok()) return s;
    if (message.inputs(i).has_tensor() && !Contiguous(message.inputs(i).tensor())) {
      v.inputs_contiguous = false;
    }
  }
  // The device's outputs stay pinned too: on a GPU bench they are compared on the GPU
  // (server/replay/judge_outputs.cc), and go up asynchronously from there.
  v.outputs.resize(message.outputs_size());
  v.output_form.resize(message.outputs_size());
  for (int i = 0; i < message.outputs_size(); ++i) {
    const v1::Value& value = message.outputs(i);
    absl::Status s = decoder.Decode(value, absl::StrCat("outputs[", i, "]"), &v.outputs[i]);
    if (s.code() == absl::StatusCode::kFailedPrecondition) {
      v.output_form[i] = NotDecoded(value, s);
    } else if (!s.ok()) {
      return s;
    }
  }
  return v;
}

}  // namespace parity::server
