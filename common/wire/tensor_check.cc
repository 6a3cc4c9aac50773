#include "common/wire/tensor_check.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/wire/crc32c.h"
#include "common/wire/dtype.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {

std::string ShapeString(absl::Span<const int64_t> shape, int max_items) {
  std::string out = "[";
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (i == max_items) {
      absl::StrAppend(&out, ", ... (", shape.size(), " dims)");
      break;
    }
    absl::StrAppend(&out, i == 0 ? "" : ", ", shape[i]);
  }
  out += "]";
  return out;
}

namespace {

// The payload against the form and the extent: inline data of exactly the extent's bytes (and its
// checksum when sent), no data for the other forms.
absl::Status CheckPayload(const v1::Tensor& t, const TensorExtent& extent, absl::string_view path) {
  const uint64_t numel = extent.numel;
  switch (t.form()) {
    case v1::DATA_FORM_INLINE:
      if (t.data().size() != extent.bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ".data: expected ", extent.bytes, " bytes (", numel, " elements x ",
            extent.element_size, " bytes of ", TorchName(static_cast<wire::DType>(t.dtype())),
            " for shape ", ShapeString(t.shape()), "), got ", t.data().size()));
      }
      if (t.has_crc32c() && Crc32c(t.data()) != t.crc32c()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ".crc32c: payload checksum mismatch (sent ", t.crc32c(),
                         ", computed ", Crc32c(t.data()), ")"));
      }
      break;
    case v1::DATA_FORM_STATS_ONLY:
    case v1::DATA_FORM_CHUNKED:
      if (!t.data().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ".data: must be empty for form ",
                                                       v1::DataForm_Name(t.form()), ", got ",
                                                       t.data().size(), " bytes"));
      }
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(path, ".form: unknown data form ", static_cast<int>(t.form())));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TensorExtent> CheckTensor(const v1::Tensor& t, const DecodeLimits& limits,
                                         absl::string_view path) {
  if (!IsKnownDType(t.dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ".dtype: unknown or unspecified dtype ", static_cast<int>(t.dtype())));
  }
  if (static_cast<uint32_t>(t.shape_size()) > limits.max_dims) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ".shape: ", t.shape_size(), " dimensions exceed max_dims ", limits.max_dims));
  }
  TensorExtent extent;
  extent.element_size = ElementSize(static_cast<wire::DType>(t.dtype()));
  uint64_t numel = 1;
  for (int i = 0; i < t.shape_size(); ++i) {
    const int64_t d = t.shape(i);
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ".shape[", i, "]: negative dimension ", d));
    }
    // Multiply with an overflow check against the cap (which is far below 2^63).
    if (d != 0 && numel > limits.max_tensor_numel / static_cast<uint64_t>(d)) {
      return absl::ResourceExhaustedError(absl::StrCat(path, ".shape: ", ShapeString(t.shape()),
                                                       " has more elements than max_tensor_numel ",
                                                       limits.max_tensor_numel));
    }
    numel *= static_cast<uint64_t>(d);
  }
  if (numel > limits.max_tensor_numel) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ".shape: ", ShapeString(t.shape()), " has ", numel,
                     " elements, over max_tensor_numel ", limits.max_tensor_numel));
  }
  extent.numel = numel;
  // numel <= max_tensor_numel (< 2^40 in practice) and element size <= 16: no overflow.
  extent.bytes = numel * extent.element_size;
  if (extent.bytes > limits.max_tensor_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        path, ": ", ShapeString(t.shape()), " of ", TorchName(static_cast<wire::DType>(t.dtype())),
        " needs ", extent.bytes, " bytes, over max_tensor_bytes ", limits.max_tensor_bytes));
  }
  if (absl::Status s = CheckPayload(t, extent, path); !s.ok()) return s;
  return extent;
}

}  // namespace parity::common
