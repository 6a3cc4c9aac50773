#include "agent/torch/tensor_bits.h"

#include <c10/util/SmallVector.h>

#include <algorithm>
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

// SameBits for a view whose two innermost dimensions are swapped against its memory (a
// transposed weight, addmm's weight.t(): stride 1 on the second-to-last dimension), compared in
// tiles of kTile x kTile elements: the view read along its memory, the copy across its rows, both
// a tile's few kilobytes in the L1 cache, where a row at a time reads the view a cache line an
// element (tests/bench/tensor_bits_bench).
constexpr int64_t kTile = 32;

template <typename T>
bool SameBitsTransposed(const char* copy, const char* base, c10::IntArrayRef sizes,
                        c10::IntArrayRef strides) {
  const int last = static_cast<int>(sizes.size()) - 1;
  const int64_t rows = sizes[last - 1], cols = sizes[last], col_stride = strides[last];
  c10::SmallVector<int64_t, 8> index(static_cast<std::size_t>(last - 1), 0);  // dims 0..last-2
  for (;;) {
    int64_t offset = 0;
    for (int d = 0; d < last - 1; ++d) offset += index[d] * strides[d];
    const char* view = base + offset * static_cast<int64_t>(sizeof(T));
    for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile);
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = std::min(cols, c0 + kTile);
        T differ = 0;
        for (int64_t c = c0; c < c1; ++c) {
          for (int64_t r = r0; r < r1; ++r) {
            T a, b;
            std::memcpy(&a, copy + (r * cols + c) * static_cast<int64_t>(sizeof(T)), sizeof(T));
            std::memcpy(&b, view + (r + c * col_stride) * static_cast<int64_t>(sizeof(T)),
                        sizeof(T));
            differ |= a ^ b;
          }
        }
        if (differ != 0) return false;
      }
    }
    copy += rows * cols * static_cast<int64_t>(sizeof(T));
    int d = last - 2;
    for (; d >= 0 && ++index[d] == sizes[d]; --d) index[d] = 0;
    if (d < 0) return true;
  }
}

// Whether `now` is a view of that kind (and worth tiling: both dimensions longer than one).
bool Transposed(const at::Tensor& now) {
  const int64_t n = now.dim();
  return n >= 2 && now.stride(n - 2) == 1 && now.size(n - 2) > 1 && now.size(n - 1) > 1 &&
         now.stride(n - 1) >= now.size(n - 2);
}

template <typename Fn>
bool ByWidth(std::size_t element, Fn&& fn) {
  switch (element) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    default:
      return fn(uint64_t{});
  }
}

}  // namespace

bool SameBitsByRows(const at::Tensor& copy, const at::Tensor& now) {
  const std::size_t element = now.element_size();
  if (now.numel() == 0 || now.dim() == 0 || element > 8 || now.stride(now.dim() - 1) == 1) {
    return SameBits(copy, now);
  }
  const auto* b = static_cast<const char*>(copy.data_ptr());
  const auto* base = static_cast<const char*>(now.data_ptr());
  return ByWidth(element, [&](auto t) {
    return SameBitsStrided<decltype(t)>(b, base, now.sizes(), now.strides());
  });
}

bool SameBits(const at::Tensor& copy, const at::Tensor& now) {
  const auto sizes = now.sizes();
  const auto strides = now.strides();
  const std::size_t element = now.element_size();
  if (now.numel() == 0) return true;
  if (copy.strides() == strides && now.is_non_overlapping_and_dense()) {
    // A copy in the tensor's own layout whose elements fill their span: the spans hold the same
    // elements at the same places.
    return std::memcmp(copy.data_ptr(), now.data_ptr(), now.numel() * element) == 0;
  }
  int k = static_cast<int>(sizes.size()) - 1;
  int64_t run = 1;  // elements in one contiguous innermost run
  for (; k >= 0 && (strides[k] == run || sizes[k] == 1); --k) run *= sizes[k];
  const auto* b = static_cast<const char*>(copy.data_ptr());
  const auto* base = static_cast<const char*>(now.data_ptr());
  const std::size_t run_bytes = static_cast<std::size_t>(run) * element;
  if (run == 1 && k >= 0 && element <= 8 && Transposed(now)) {
    return ByWidth(
        element, [&](auto t) { return SameBitsTransposed<decltype(t)>(b, base, sizes, strides); });
  }
  if (run == 1 && k >= 0 && element <= 8) {
    // The innermost dimension itself is strided: one loop per row of it (complex128: memcmp a run).
    return ByWidth(element,
                   [&](auto t) { return SameBitsStrided<decltype(t)>(b, base, sizes, strides); });
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
