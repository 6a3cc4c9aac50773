#include "agent/torch/tensor_bits.h"

#include <cstring>
#include <vector>

namespace parity::agent {

bool SameBits(const at::Tensor& copy, const at::Tensor& now) {
  const auto sizes = now.sizes();
  const auto strides = now.strides();
  const std::size_t element = now.element_size();
  if (now.numel() == 0) return true;
  int k = static_cast<int>(sizes.size()) - 1;
  int64_t run = 1;  // elements in one contiguous innermost run
  for (; k >= 0 && (strides[k] == run || sizes[k] == 1); --k) run *= sizes[k];
  const auto* b = static_cast<const char*>(copy.data_ptr());
  const auto* base = static_cast<const char*>(now.data_ptr());
  const std::size_t run_bytes = static_cast<std::size_t>(run) * element;
  std::vector<int64_t> index(static_cast<std::size_t>(k + 1), 0);  // over dims 0..k
  for (;;) {
    int64_t offset = 0;
    for (int d = 0; d <= k; ++d) offset += index[d] * strides[d];
    if (std::memcmp(b, base + offset * static_cast<int64_t>(element), run_bytes) != 0) return false;
    b += run_bytes;
    int d = k;
    for (; d >= 0 && ++index[d] == sizes[d]; --d) index[d] = 0;
    if (d < 0) return true;
  }
}

at::Tensor DeviceBitsDiffer(const at::Tensor& a, const at::Tensor& b) {
  at::ScalarType bits;
  switch (a.element_size()) {
    case 1:
      bits = at::kByte;
      break;
    case 2:
      bits = at::kShort;
      break;
    case 4:
      bits = at::kInt;
      break;
    case 8:
      bits = at::kLong;
      break;
    default:
      return {};
  }
  const auto as_bits = [bits](const at::Tensor& t) {
    return t.scalar_type() == bits ? t : t.view(bits);
  };
  return at::ne(as_bits(a), as_bits(b)).any();
}

}  // namespace parity::agent
