// npu_confusion_transpose, npu_linear, matmul_backward, npu_moe_gating_top_k_softmax,
// npu_sort_v2 (data movement and GEMMs: computed at the inputs' dtype, as the NPU does).
#include "oplib/npu/kernels.h"

namespace parity::oplib::npu {
namespace {

std::vector<int64_t> Inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) {
    TORCH_CHECK(perm[i] >= 0 && static_cast<std::size_t>(perm[i]) < perm.size(),
                "npu_confusion_transpose: perm is not a permutation");
    inv[static_cast<std::size_t>(perm[i])] = static_cast<int64_t>(i);
  }
  return inv;
}

}  // namespace

// transpose_first: x.permute(perm).reshape(shape); else x.reshape(shape).permute(perm).
Stack ConfusionTranspose(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  const std::vector<int64_t> perm = a.ints(1), shape = a.ints(2);
  const at::Tensor y =
      a.boolean(3) ? x.permute(perm).reshape(shape) : x.reshape(shape).permute(perm);
  return Results({y.contiguous()});
}

// torch_npu's derivative: npu_confusion_transpose_backward(grad, perm, self.sizes(),
// !transpose_first); `shape` is the forward input's shape.
Stack ConfusionTransposeBackward(const Args& a) {
  const at::Tensor& grad = a.tensor(0);
  const std::vector<int64_t> perm = a.ints(1), shape = a.ints(2);
  const std::vector<int64_t> inv = Inverse(perm);
  at::Tensor dx;
  if (a.boolean(3)) {
    dx = grad.permute(inv).reshape(shape);
  } else {
    std::vector<int64_t> permuted;
    for (int64_t p : perm) permuted.push_back(shape.at(static_cast<std::size_t>(p)));
    dx = grad.reshape(permuted).permute(inv);
  }
  return Results({dx.contiguous()});
}

Stack Linear(const Args& a) {
  const std::optional<at::Tensor> bias = a.optional_tensor(2);
  return Results({at::linear(a.tensor(0), a.tensor(1),
                             bias ? c10::optional<at::Tensor>(*bias) : c10::nullopt)});
}

// d input = grad @ weight, d weight = grad^T @ input (2-D, as torch_npu's npu_linear).
Stack LinearBackward(const Args& a) {
  const at::Tensor& grad = a.tensor(0);
  const at::Tensor& input = a.tensor(1);
  const at::Tensor& weight = a.tensor(2);
  return Results({at::matmul(grad, weight), at::matmul(grad.t(), input)});
}

// The gradients of matmul(self, other) for any ranks: 1-D operands are lifted to matrices,
// batch dims broadcast, and each gradient is summed back to its operand's shape. mask says
// which to compute (an undefined tensor for the other).
Stack MatmulBackward(const Args& a) {
  const at::Tensor& grad = a.tensor(0);
  const at::Tensor& self = a.tensor(1);
  const at::Tensor& other = a.tensor(2);
  const std::vector<bool> mask = a.bools(3);
  TORCH_CHECK(mask.size() == 2, a.op_name(), ": mask must have 2 values");
  const at::Tensor s = self.dim() == 1 ? self.unsqueeze(0) : self;      // (1, k)
  const at::Tensor o = other.dim() == 1 ? other.unsqueeze(-1) : other;  // (k, 1)
  at::Tensor g = grad;
  if (self.dim() == 1) g = g.unsqueeze(other.dim() == 1 ? 0 : -2);
  if (other.dim() == 1) g = g.unsqueeze(-1);
  at::Tensor ds, dother;
  if (mask[0]) {
    ds = at::sum_to(at::matmul(g, o.transpose(-1, -2)), s.sizes());
    if (self.dim() == 1) ds = ds.squeeze(0);
  }
  if (mask[1]) {
    dother = at::sum_to(at::matmul(s.transpose(-1, -2), g), o.sizes());
    if (other.dim() == 1) dother = dother.squeeze(-1);
  }
  // sum_to cannot reduce a gradient of the wrong shape to its operand's: refuse it.
  TORCH_CHECK(!ds.defined() || ds.sizes() == self.sizes(), a.op_name(), ": grad ", grad.sizes(),
              " does not fit matmul(", self.sizes(), ", ", other.sizes(), ")");
  TORCH_CHECK(!dother.defined() || dother.sizes() == other.sizes(), a.op_name(), ": grad ",
              grad.sizes(), " does not fit matmul(", self.sizes(), ", ", other.sizes(), ")");
  return Results({ds, dother});
}

// softmax over the experts (float32), the top k per row (ties: the lower expert), finished rows
// routed to expert E; row_idx[i][j] = j * rows + i.
Stack MoeGatingTopKSoftmax(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  const std::optional<at::Tensor> finished = a.optional_tensor(1);
  const int64_t k = a.i64(2);
  const int64_t experts = x.size(-1);
  TORCH_CHECK(k >= 1 && k <= experts, a.op_name(), ": k = ", k, " for ", experts, " experts");
  const at::Tensor rows = x.reshape({-1, experts});
  const at::Tensor p = at::softmax(Upcast(rows), -1);
  const at::Tensor order = at::argsort(p, /*stable=*/true, /*dim=*/-1, /*descending=*/true);
  at::Tensor idx = order.narrow(-1, 0, k);
  const at::Tensor y = p.gather(-1, idx).to(x.scalar_type());
  if (finished) {
    const at::Tensor f = finished->reshape({-1, 1}).to(at::kBool).expand_as(idx);
    idx = at::where(f, at::full_like(idx, experts), idx);
  }
  const int64_t n = rows.size(0);
  const at::Tensor row_idx = at::arange(n * k, x.options().dtype(at::kLong)).reshape({k, n}).t();
  auto shaped = [&](const at::Tensor& t) {
    std::vector<int64_t> s = x.sizes().vec();
    s.back() = k;
    return t.reshape(s).contiguous();
  };
  return Results({shaped(y), shaped(idx.to(at::kInt)), shaped(row_idx.to(at::kInt))});
}

Stack SortV2(const Args& a) {
  return Results({std::get<0>(at::sort(a.tensor(0), /*stable=*/true, a.i64(1), a.boolean(2)))});
}

Stack SortV2Out(const Args& a) {
  at::Tensor out = a.tensor(3);
  const at::Tensor sorted =
      std::get<0>(at::sort(a.tensor(0), /*stable=*/true, a.i64(1), a.boolean(2)));
  out.resize_(sorted.sizes());
  out.copy_(sorted);
  return Results({out});
}

}  // namespace parity::oplib::npu
