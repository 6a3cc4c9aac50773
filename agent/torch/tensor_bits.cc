#include "agent/torch/tensor_bits.h"

#include <c10/util/SmallVector.h>

#include <cstring>

namespace parity::agent {

namespace {

// SameBits for a view whose innermost dimension is strided (a transposed weight, an addmm's
// weight.t(): runs of one element), compared in one loop a row instead of a memcmp call an element:
// the copy read in order, the view through its strides, each element compared as an integer of its
// width (bits, not values).
template <typename T>
bool SameBitsStrided(const char* copy, const char* base, c10::IntArrayRef sizes,
                     c10::IntArrayRef strides) {
  const int last = static_cast<int>(sizes.size()) - 1;
  const int64_t n = sizes[last];
  const int64_t step = strides[last];
  c10::SmallVector<int64_t, 8> index(static_cast<std::size_t>(last), 0);  // dims 0..last-1
  for (;;) {
    int64_t offset = 0;
    for (int d = 0; d < last; ++d) offset += index[d] * strides[d];
    const char* row = base + offset * static_cast<int64_t>(sizeof(T));
    T differ = 0;
    for (int64_t i = 0; i < n; ++i) {
      T a, b;
      std::memcpy(&a, copy + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
      std::memcpy(&b, row + i * step * static_cast<int64_t>(sizeof(T)), sizeof(T));
      differ |= a ^ b;
    }
    if (differ != 0) return false;
    copy += n * static_cast<int64_t>(sizeof(T));
    int d = last - 1;
    for (; d >= 0 && ++index[d] == sizes[d]; --d) index[d] = 0;
    if (d < 0) return true;
  }
}

}  // namespace

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
  if (run == 1 && k >= 0) {
    // The innermost dimension itself is strided: one loop per row of it.
    switch (element) {
      case 1:
        return SameBitsStrided<uint8_t>(b, base, sizes, strides);
      case 2:
        return SameBitsStrided<uint16_t>(b, base, sizes, strides);
      case 4:
        return SameBitsStrided<uint32_t>(b, base, sizes, strides);
      case 8:
        return SameBitsStrided<uint64_t>(b, base, sizes, strides);
      default:
        break;  // complex128: memcmp a run
    }
  }
  c10::SmallVector<int64_t, 8> index(static_cast<std::size_t>(k + 1), 0);  // dims 0..k
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
