// npu_rotary_mul, npu_swiglu, npu_fast_gelu, npu_mish, npu_scaled_masked_softmax and their
// backwards.
#include "oplib/npu/kernels.h"

namespace parity::oplib::npu {
namespace {

// rotary_mode "half": (x1, x2) halves of the last dim -> (-x2, x1). "interleave": pairs
// (x[2i], x[2i+1]) -> (-x[2i+1], x[2i]).
at::Tensor Rotate(const at::Tensor& x, const std::string& mode) {
  if (mode == "half") {
    const auto halves = x.chunk(2, -1);
    return at::cat({-halves[1], halves[0]}, -1);
  }
  TORCH_CHECK(mode == "interleave",
              "npu_rotary_mul: rotary_mode must be 'half' or 'interleave', got '", mode, "'");
  auto sizes = x.sizes().vec();
  sizes.back() /= 2;
  sizes.push_back(2);
  const at::Tensor pairs = x.reshape(sizes);
  return at::stack({-pairs.select(-1, 1), pairs.select(-1, 0)}, -1).reshape(x.sizes());
}

// The transpose of Rotate: the gradient of sum(g * Rotate(x)) with respect to x.
at::Tensor RotateTransposed(const at::Tensor& g, const std::string& mode) {
  if (mode == "half") {
    const auto halves = g.chunk(2, -1);
    return at::cat({halves[1], -halves[0]}, -1);
  }
  return -Rotate(g, mode);
}

}  // namespace

// y = x * r1 + rotate(x) * r2.
Stack RotaryMul(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  TORCH_CHECK(x.size(-1) % 2 == 0, a.op_name(), ": the last dim (", x.size(-1), ") must be even");
  const at::Tensor xc = Upcast(x);
  const at::Tensor y = xc * a.tensor(1).to(xc.scalar_type()) +
                       Rotate(xc, a.str(3)) * a.tensor(2).to(xc.scalar_type());
  return Results({y.to(x.scalar_type())});
}

Stack RotaryMulBackward(const Args& a) {
  const at::Tensor& grad = a.tensor(0);
  const at::Tensor& x = a.tensor(1);
  const at::Tensor& r1 = a.tensor(2);
  const at::Tensor& r2 = a.tensor(3);
  const std::string mode = a.str(4);
  const at::ScalarType ct = ComputeType(x);
  const at::Tensor g = grad.to(ct), xc = x.to(ct);
  const at::Tensor dx = g * r1.to(ct) + RotateTransposed(g * r2.to(ct), mode);
  const at::Tensor dr1 = at::sum_to(g * xc, r1.sizes());
  const at::Tensor dr2 = at::sum_to(g * Rotate(xc, mode), r2.sizes());
  return Results({dx.to(x.scalar_type()), dr1.to(r1.scalar_type()), dr2.to(r2.scalar_type())});
}

// x = (a, b) halves along dim: y = silu(a) * b.
Stack Swiglu(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  const int64_t dim = a.i64(1);
  TORCH_CHECK(x.size(dim) % 2 == 0, a.op_name(), ": dim ", dim, " (", x.size(dim),
              ") must be even");
  const auto halves = Upcast(x).chunk(2, dim);
  return Results({(at::silu(halves[0]) * halves[1]).to(x.scalar_type())});
}

Stack SwigluBackward(const Args& a) {
  const at::Tensor& grad = a.tensor(0);
  const at::Tensor& x = a.tensor(1);
  const int64_t dim = a.i64(2);
  const auto halves = Upcast(x).chunk(2, dim);
  const at::Tensor g = grad.to(ComputeType(x));
  const at::Tensor s = at::sigmoid(halves[0]);
  const at::Tensor da = g * halves[1] * s * (1 + halves[0] * (1 - s));
  const at::Tensor db = g * halves[0] * s;
  return Results({at::cat({da, db}, dim).to(x.scalar_type())});
}

// fast_gelu(x) = x * sigmoid(1.702 x).
Stack FastGelu(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  const at::Tensor xc = Upcast(x);
  return Results({(xc * at::sigmoid(1.702 * xc)).to(x.scalar_type())});
}

Stack FastGeluBackward(const Args& a) {
  const at::Tensor& x = a.tensor(1);
  const at::Tensor xc = Upcast(x);
  const at::Tensor s = at::sigmoid(1.702 * xc);
  const at::Tensor d = s + 1.702 * xc * s * (1 - s);
  return Results({(a.tensor(0).to(xc.scalar_type()) * d).to(x.scalar_type())});
}

// mish(x) = x * tanh(softplus(x)).
Stack Mish(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  const at::Tensor xc = Upcast(x);
  return Results({(xc * at::tanh(at::softplus(xc))).to(x.scalar_type())});
}

Stack MishBackward(const Args& a) {
  const at::Tensor& x = a.tensor(1);
  const at::Tensor xc = Upcast(x);
  const at::Tensor t = at::tanh(at::softplus(xc));
  const at::Tensor d = t + xc * at::sigmoid(xc) * (1 - t * t);
  return Results({(a.tensor(0).to(xc.scalar_type()) * d).to(x.scalar_type())});
}

namespace {

// The mask a call means: the given one, or (fixed_triu_mask) the causal upper triangle.
at::Tensor SoftmaxMask(const at::Tensor& x, const at::Tensor& mask, bool fixed_triu) {
  if (!fixed_triu) return mask.to(at::kBool);
  const int64_t s1 = x.size(-2), s2 = x.size(-1);
  return at::ones({s1, s2}, x.options().dtype(at::kBool)).triu(1);
}

}  // namespace

// softmax(x * scale, masked positions (mask true) at -10000) over the last dim.
Stack ScaledMaskedSoftmax(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  const at::Tensor mask = SoftmaxMask(x, a.tensor(1), a.boolean(3));
  const at::Tensor xc = Upcast(x);
  const at::Tensor scaled = (xc * a.scalar(2)).masked_fill(mask, -10000.0);
  return Results({at::softmax(scaled, -1).to(x.scalar_type())});
}

// dx = scale * y * (dy - sum(dy * y)), 0 where masked.
Stack ScaledMaskedSoftmaxBackward(const Args& a) {
  const at::Tensor& dy = a.tensor(0);
  const at::Tensor& y = a.tensor(1);
  const at::Tensor mask = SoftmaxMask(y, a.tensor(2), a.boolean(4));
  const at::ScalarType ct = ComputeType(y);
  const at::Tensor g = dy.to(ct), yc = y.to(ct);
  const at::Tensor dx = (yc * (g - (g * yc).sum(-1, true)) * a.scalar(3)).masked_fill(mask, 0.0);
  return Results({dx.to(dy.scalar_type())});
}

}  // namespace parity::oplib::npu
