// npu_rms_norm (+ backward), npu_layer_norm_eval, npu_group_norm_silu.
#include <numeric>

#include "oplib/npu/kernels.h"

namespace parity::oplib::npu {
namespace {

// The trailing `n` dimensions of a rank-`rank` tensor.
std::vector<int64_t> LastDims(int64_t rank, int64_t n) {
  std::vector<int64_t> dims(static_cast<std::size_t>(n));
  std::iota(dims.begin(), dims.end(), rank - n);
  return dims;
}

}  // namespace

at::ScalarType ComputeType(const at::Tensor& t) {
  return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16 ? at::kFloat
                                                                          : t.scalar_type();
}
at::Tensor Upcast(const at::Tensor& t) { return t.to(ComputeType(t)); }
at::ScalarType StatsType(const at::Tensor& computed) {
  return computed.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// y = x * rsqrt(mean(x^2) + eps) * gamma over gamma's (trailing) dimensions; rstd keeps them as 1.
Stack RmsNorm(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  const at::Tensor& gamma = a.tensor(1);
  const double eps = a.f64(2);
  TORCH_CHECK(gamma.dim() >= 1 && gamma.dim() <= x.dim(), a.op_name(), ": gamma has ", gamma.dim(),
              " dims for an input of ", x.dim());
  const at::Tensor xc = Upcast(x);
  const at::Tensor rstd = at::rsqrt(xc.pow(2).mean(LastDims(x.dim(), gamma.dim()), true) + eps);
  const at::Tensor y = xc * rstd * gamma.to(xc.scalar_type());
  return Results({y.to(x.scalar_type()), rstd.to(StatsType(xc))});
}

// dx = rstd * (dy*gamma - xhat * mean(dy*gamma*xhat)), dgamma = sum over the rows of dy*xhat.
Stack RmsNormBackward(const Args& a) {
  const at::Tensor& dy = a.tensor(0);
  const at::Tensor& x = a.tensor(1);
  const at::Tensor& gamma = a.tensor(2);
  const at::Tensor& rstd_in = a.tensor(3);
  const at::ScalarType ct = ComputeType(x);
  const std::vector<int64_t> norm_dims = LastDims(x.dim(), gamma.dim());
  const at::Tensor rstd = rstd_in.to(ct);
  const at::Tensor xhat = x.to(ct) * rstd;
  const at::Tensor dyc = dy.to(ct);
  const at::Tensor dxhat = dyc * gamma.to(ct);
  const at::Tensor dx = rstd * (dxhat - xhat * (dxhat * xhat).mean(norm_dims, true));
  const at::Tensor dgamma = at::sum_to(dyc * xhat, gamma.sizes());
  return Results({dx.to(x.scalar_type()), dgamma.to(StatsType(dx))});
}

Stack LayerNormEval(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  const std::vector<int64_t> shape = a.ints(1);
  const std::optional<at::Tensor> w = a.optional_tensor(2), b = a.optional_tensor(3);
  const at::Tensor xc = Upcast(x);
  auto cast = [&](const std::optional<at::Tensor>& t) -> c10::optional<at::Tensor> {
    if (!t) return c10::nullopt;
    return t->to(xc.scalar_type());
  };
  return Results({at::layer_norm(xc, shape, cast(w), cast(b), a.f64(4)).to(x.scalar_type())});
}

// silu(group_norm(x)) with the groups' mean and rstd, (N, group), in the input's dtype.
Stack GroupNormSilu(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  const std::optional<at::Tensor> w = a.optional_tensor(1), b = a.optional_tensor(2);
  const int64_t group = a.i64(3);
  const double eps = a.f64(4);
  TORCH_CHECK(x.dim() >= 2 && group > 0 && x.size(1) % group == 0, a.op_name(), ": channels (",
              x.dim() >= 2 ? x.size(1) : 0, ") must split into ", group, " groups");
  const int64_t n = x.size(0), c = x.size(1);
  const at::Tensor xc = Upcast(x);
  const at::Tensor grouped = xc.reshape({n, group, -1});
  const at::Tensor mean = grouped.mean(-1, true);
  const at::Tensor var = (grouped - mean).pow(2).mean(-1, true);
  const at::Tensor rstd = at::rsqrt(var + eps);
  at::Tensor y = ((grouped - mean) * rstd).reshape(x.sizes());
  std::vector<int64_t> channel_shape(static_cast<std::size_t>(x.dim()), 1);
  channel_shape[1] = c;
  if (w) y = y * w->to(xc.scalar_type()).reshape(channel_shape);
  if (b) y = y + b->to(xc.scalar_type()).reshape(channel_shape);
  y = at::silu(y);
  return Results({y.to(x.scalar_type()), mean.reshape({n, group}).to(x.scalar_type()),
                  rstd.reshape({n, group}).to(x.scalar_type())});
}

}  // namespace parity::oplib::npu
