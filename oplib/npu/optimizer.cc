// npu_apply_adam and npu_apply_adam_w: one optimizer step on (var, m, v), as CANN's ApplyAdam /
// ApplyAdamW define it. npu_apply_adam takes the bias corrections 1 - beta1_power and
// 1 - beta2_power from the powers as passed (op-plugin test/test_base_ops/test_apply_adam.py,
// _inner_lr_compute); npu_apply_adam_w advances the powers by one step first, 1 - beta1_power *
// beta1 (both of op-plugin's goldens, test/test_base_ops/test_apply_adam_w.py and
// test/test_custom_ops/test_npu_apply_adam_w.py: beta1_power_out = beta1_power * beta1), so its
// callers pass beta ** (step - 1). Computed in float32 for low-precision state, float64 for the
// golden.
#include "oplib/npu/kernels.h"

namespace parity::oplib::npu {
namespace {

struct State {
  at::Tensor var, m, v;  // the call's tensors (written by .out)
};

State OutState(const Args& a, std::size_t first) {
  return {a.tensor(first), a.tensor(first + 1), a.tensor(first + 2)};
}

Stack WriteBack(const State& s, const at::Tensor& var, const at::Tensor& m, const at::Tensor& v) {
  s.var.copy_(var);
  s.m.copy_(m);
  s.v.copy_(v);
  return Results({s.var, s.m, s.v});
}

[[noreturn]] void NoState(const Args& a) {
  TORCH_CHECK(false, a.op_name(),
              ": this overload takes no var/m/v; torch_npu updates them through the .out "
              "overload, which the reference implements");
}

}  // namespace

Stack ApplyAdam(const Args& a) { NoState(a); }
Stack ApplyAdamW(const Args& a) { NoState(a); }

// (beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, use_locking, use_nesterov, var,
// m, v)
Stack ApplyAdamOut(const Args& a) {
  const double b1p = a.f64(0), b2p = a.f64(1), lr = a.f64(2), b1 = a.f64(3), b2 = a.f64(4),
               eps = a.f64(5);
  const bool nesterov = a.optional_bool(8).value_or(false);
  const State s = OutState(a, 9);
  const at::ScalarType ct = ComputeType(s.var);
  const at::Tensor g = a.tensor(6).to(ct);
  const at::Tensor m = s.m.to(ct) + (g - s.m.to(ct)) * (1 - b1);
  const at::Tensor v = s.v.to(ct) + (g * g - s.v.to(ct)) * (1 - b2);
  const double lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);
  const at::Tensor step = nesterov ? (g * (1 - b1) + m * b1) : m;
  const at::Tensor var = s.var.to(ct) - step * lr_t / (at::sqrt(v) + eps);
  return WriteBack(s, var, m, v);
}

// (beta1_power, beta2_power, lr, weight_decay, beta1, beta2, epsilon, grad, max_grad_norm,
// amsgrad, maximize, var, m, v)
Stack ApplyAdamWOut(const Args& a) {
  const double b1p = a.f64(0), b2p = a.f64(1), lr = a.f64(2), wd = a.f64(3), b1 = a.f64(4),
               b2 = a.f64(5), eps = a.f64(6);
  const std::optional<at::Tensor> max_grad_norm = a.optional_tensor(8);
  const bool amsgrad = a.optional_bool(9).value_or(false);
  const bool maximize = a.optional_bool(10).value_or(false);
  const State s = OutState(a, 11);
  const at::ScalarType ct = ComputeType(s.var);
  at::Tensor g = a.tensor(7).to(ct);
  if (maximize) g = -g;
  const at::Tensor m = s.m.to(ct) * b1 + g * (1 - b1);
  const at::Tensor v = s.v.to(ct) * b2 + g * g * (1 - b2);
  at::Tensor second = v;
  if (amsgrad) {
    TORCH_CHECK(max_grad_norm.has_value(), a.op_name(), ": amsgrad needs max_grad_norm");
    second = at::maximum(max_grad_norm->to(ct), v);
  }
  // The powers after this step (ApplyAdamW advances them itself).
  const double b1p_out = b1p * b1, b2p_out = b2p * b2;
  const at::Tensor denom = at::sqrt(second / (1 - b2p_out)) + eps;
  const at::Tensor var = s.var.to(ct) * (1 - lr * wd) - (m / (1 - b1p_out)) * lr / denom;
  return WriteBack(s, var, m, v);
}

}  // namespace parity::oplib::npu
