// SameBits (agent/torch/tensor_bits.h), the proof the read-only check and the snapshot cache
// rest on: for contiguous tensors, transposed and strided views (the one-element runs compared in
// a loop), permuted 3-d views and every element width, equal bits are the same and any one bit
// flipped anywhere is seen; -0.0 against 0.0 and NaN payloads differ.
#include "agent/torch/tensor_bits.h"

#include "gtest/gtest.h"

namespace parity::agent {
namespace {

// The views of `base` the tests look through: itself, transposed, narrowed, every other column,
// every third row transposed.
std::vector<at::Tensor> Views(const at::Tensor& base) {
  return {base, base.t(), base.narrow(1, 1, base.size(1) - 2), base.slice(1, 0, base.size(1), 2),
          base.slice(0, 0, base.size(0), 3).t()};
}

TEST(TensorBitsTest, EqualBitsAreTheSameAndAnyFlippedBitIsSeenThroughEveryView) {
  for (const at::ScalarType dtype :
       {at::kByte, at::kShort, at::kFloat, at::kDouble, at::kBFloat16, at::kComplexDouble}) {
    SCOPED_TRACE(c10::toString(dtype));
    const at::Tensor base = at::randn({12, 10}).to(dtype);
    for (const at::Tensor& view : Views(base)) {
      SCOPED_TRACE(::testing::PrintToString(view.strides()));
      const at::Tensor copy = view.contiguous().clone();
      EXPECT_TRUE(SameBits(copy, view));
      // Flip one bit of every 7th element in turn, through the storage under the view.
      at::Tensor bytes = base.view({-1}).view(at::kByte);
      for (int64_t i = 0; i < view.numel(); i += 7) {
        // The element's address: its index in the view, through the view's strides.
        int64_t at = view.storage_offset() - base.storage_offset(), rest = i;
        for (int64_t d = view.dim() - 1; d >= 0; --d) {
          at += (rest % view.size(d)) * view.stride(d);
          rest /= view.size(d);
        }
        const int64_t byte = at * static_cast<int64_t>(base.element_size()) +
                             (i % static_cast<int64_t>(base.element_size()));
        bytes[byte].bitwise_xor_(1 << (i % 8));
        EXPECT_FALSE(SameBits(copy, view)) << "element " << i;
        bytes[byte].bitwise_xor_(1 << (i % 8));
        EXPECT_TRUE(SameBits(copy, view)) << "element " << i << " restored";
      }
    }
  }
}

// Transposed views larger than one tile (32 x 32 elements), with partial tiles at the edges, in
// 2-d and batched 3-d, every width: the tiled compare sees one flipped bit anywhere, as the
// row-by-row loop it replaced does.
TEST(TensorBitsTest, TransposedViewsAreComparedTileByTileExactly) {
  for (const at::ScalarType dtype : {at::kByte, at::kBFloat16, at::kFloat, at::kDouble}) {
    SCOPED_TRACE(c10::toString(dtype));
    const at::Tensor flat = at::randn({3 * 70 * 45}).to(dtype);
    for (const at::Tensor& view :
         {flat.narrow(0, 0, 70 * 45).view({70, 45}).t(), flat.view({3, 70, 45}).transpose(1, 2),
          flat.view({3, 70, 45}).transpose(1, 2).slice(1, 5, 45, 1)}) {
      SCOPED_TRACE(::testing::PrintToString(view.sizes()));
      const at::Tensor copy = view.contiguous().clone();
      ASSERT_TRUE(SameBits(copy, view));
      ASSERT_TRUE(SameBitsByRows(copy, view));
      // The agent's copy of a view that fills its memory: in the view's own layout (one memcmp).
      const bool dense = view.is_non_overlapping_and_dense();
      const at::Tensor own =
          dense ? at::empty_strided(view.sizes(), view.strides(), view.options()).copy_(view)
                : copy;
      ASSERT_TRUE(SameBits(own, view));
      at::Tensor bytes = flat.view(at::kByte);
      const int64_t width = static_cast<int64_t>(flat.element_size());
      for (int64_t i = 0; i < view.numel(); i += 5) {
        int64_t at = view.storage_offset(), rest = i;
        for (int64_t d = view.dim() - 1; d >= 0; --d) {
          at += (rest % view.size(d)) * view.stride(d);
          rest /= view.size(d);
        }
        const int64_t byte = at * width + (i % width);
        bytes[byte].bitwise_xor_(1 << (i % 8));
        EXPECT_FALSE(SameBits(copy, view)) << "element " << i;
        EXPECT_FALSE(SameBitsByRows(copy, view)) << "element " << i;
        EXPECT_FALSE(SameBits(own, view)) << "own layout, element " << i;
        bytes[byte].bitwise_xor_(1 << (i % 8));
      }
      EXPECT_TRUE(SameBits(copy, view));
    }
  }
}

TEST(TensorBitsTest, BitsNotValues) {
  const at::Tensor zero = at::zeros({4, 3}).t();
  EXPECT_FALSE(SameBits(at::zeros({3, 4}).neg(), zero)) << "-0.0 is not 0.0";
  const at::Tensor nan = at::full({3, 4}, std::nan("1"));
  EXPECT_TRUE(SameBits(nan.clone(), nan));
  at::Tensor other = nan.clone();
  other.view(at::kInt)[1][2].bitwise_xor_(1);  // another NaN payload
  EXPECT_FALSE(SameBits(other, nan));
  EXPECT_TRUE(SameBits(at::empty({0}), at::empty({0})));
}

}  // namespace
}  // namespace parity::agent
