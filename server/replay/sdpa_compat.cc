// torch 2.x's attention kernels behind scaled_dot_product_attention, for a bench whose libtorch
// lacks them (Debian's 1.13): the CPU flash kernel and its backward (what a torch 2.2+ training's
// SDPA backward calls on the CPU, and a compiled model calls directly), the CUDA flash and
// memory-efficient kernels and their backwards (a GPU training's), and inductor's
// _reinterpret_tensor view. Schemas as torch 2.6 declares them (read from its wheel).
//
// Each is the math of attention: S = scale * Q K^T (+ the mask or bias; the causal mask
// top-left, as SDPA's is_causal), P = softmax(S), O = P V, logsumexp = log(sum(exp(S))) per row,
// with GQA's key/value heads repeated. A backward computes from what the kernel was handed, as
// the fused NPU references do: P = exp(S - logsumexp) from the forward's logsumexp, and the
// softmax correction rowsum(dO * O) from its output, then dV = P^T dO, dS = P (dO V^T - D),
// dQ = scale dS K, dK = scale dS^T Q, the key/value heads' gradients summed over their group.
// float16/bfloat16 are computed in float32, the probabilities P and the scores' gradient dS handed
// to their GEMMs in the input's dtype, as the flash kernels do (PyTorch's CPU kernel's
// qk_reduced: the bench replays a correct kernel at the call's precision, not a more accurate
// one); the golden (float64) in float64 throughout.
// dropout_p > 0 is refused (the mask comes from the training's generator): SKIP with the reason.
#include "server/replay/sdpa_compat.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/torch/torch_pch.h"
#include "oplib/support/boxed_kernel.h"

namespace parity::server {
namespace {

using oplib::Args;
using oplib::Stack;

at::ScalarType ComputeType(const at::Tensor& t) {
  return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16 ? at::kFloat
                                                                          : t.scalar_type();
}

struct Attention {
  at::Tensor q, k, v;              // compute dtype; k and v with their heads repeated to q's
  std::optional<at::Tensor> mask;  // additive, broadcastable to (..., L, S); -inf where masked
  double scale = 1.0;
  int64_t group = 1;                      // q heads per key/value head
  std::optional<at::ScalarType> reduced;  // float16/bfloat16 inputs: the GEMMs' operand dtype
};

Attention Prepare(const Args& a, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const std::optional<at::Tensor>& mask, bool is_causal, const c10::IValue& scale,
                  double dropout_p) {
  TORCH_CHECK(dropout_p == 0.0, a.op_name(), ": dropout_p ", dropout_p,
              " > 0 applies a dropout mask drawn from the training's generator, which the "
              "decomposition cannot rebuild");
  TORCH_CHECK(q.dim() >= 3 && k.dim() == q.dim() && v.dim() == q.dim(), a.op_name(),
              ": query, key and value of one rank (batch..., heads, length, dim) expected");
  Attention at;
  const at::ScalarType ct = ComputeType(q);
  if (ct != q.scalar_type()) at.reduced = q.scalar_type();
  at.q = q.to(ct);
  at.group = k.size(-3) > 0 && q.size(-3) % k.size(-3) == 0 ? q.size(-3) / k.size(-3) : 1;
  at.k = k.to(ct).repeat_interleave(at.group, -3);
  at.v = v.to(ct).repeat_interleave(at.group, -3);
  at.scale = scale.isNone() ? 1.0 / std::sqrt(static_cast<double>(q.size(-1))) : scale.toDouble();
  const int64_t l = q.size(-2), s = k.size(-2);
  at::Tensor additive;
  if (is_causal) {
    const at::Tensor keep = at::ones({l, s}, at.q.options().dtype(at::kBool)).tril();
    additive = at::zeros({l, s}, at.q.options())
                   .masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity());
  }
  if (mask && mask->defined() && mask->numel() > 0) {
    const at::Tensor m =
        mask->scalar_type() == at::kBool
            ? at::zeros(mask->sizes(), at.q.options())
                  .masked_fill(mask->logical_not(), -std::numeric_limits<double>::infinity())
            : mask->to(ct).narrow(-1, 0, s);
    additive = additive.defined() ? additive + m : m;
  }
  if (additive.defined()) at.mask = additive;
  return at;
}

// `x` as a GEMM of the kernel takes it: rounded to the inputs' dtype when they are reduced.
at::Tensor Operand(const Attention& at, const at::Tensor& x) {
  return at.reduced ? x.to(*at.reduced).to(x.scalar_type()) : x;
}

at::Tensor Scores(const Attention& at) {
  at::Tensor s = at::matmul(at.q, at.k.transpose(-2, -1)) * at.scale;
  return at.mask ? s + *at.mask : s;
}

// The logsumexp statistic's dtype: float32, float64 in the golden.
at::ScalarType StatsType(const Attention& at) {
  return at.q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// (output, logsumexp) in the query's dtype and the statistic's.
std::pair<at::Tensor, at::Tensor> Forward(const Attention& at, at::ScalarType out) {
  const at::Tensor s = Scores(at);
  const at::Tensor lse = at::logsumexp(s, -1, /*keepdim=*/true);
  // A row with nothing to attend to (every score -inf) gives 0, as the kernels do.
  const at::Tensor p = at::where(at::isinf(lse), at::zeros_like(s), at::exp(s - lse));
  return {at::matmul(Operand(at, p), at.v).to(out), lse.squeeze(-1).to(StatsType(at))};
}

// A key/value head's gradient: the sum over the query heads of its group.
at::Tensor SumGroups(const at::Tensor& x, int64_t group) {
  if (group == 1) return x;
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 3);
  shape.insert(shape.end(), {x.size(-3) / group, group, x.size(-2), x.size(-1)});
  return x.reshape(shape).sum(-3);
}

struct Gradients {
  at::Tensor dq, dk, dv, ds;  // ds: the scores' gradient (a bias's), before the scale
};

Gradients Backward(const Attention& at, const at::Tensor& dout, const at::Tensor& out,
                   const at::Tensor& lse) {
  const at::ScalarType ct = at.q.scalar_type();
  const at::Tensor s = Scores(at);
  const int64_t l = at.q.size(-2);
  const at::Tensor row = lse.to(ct).narrow(-1, 0, l).unsqueeze(-1);  // efficient pads its LSE
  const at::Tensor p = at::where(at::isinf(row), at::zeros_like(s), at::exp(s - row));
  const at::Tensor g = dout.to(ct);
  const at::Tensor d = (g * out.to(ct)).sum(-1, /*keepdim=*/true);
  const at::Tensor ds = p * (at::matmul(g, at.v.transpose(-2, -1)) - d);
  const at::Tensor ds_operand = Operand(at, ds);
  Gradients r;
  r.dq = at::matmul(ds_operand, at.k) * at.scale;
  r.dk = SumGroups(at::matmul(ds_operand.transpose(-2, -1), at.q) * at.scale, at.group);
  r.dv = SumGroups(at::matmul(Operand(at, p).transpose(-2, -1), g), at.group);
  r.ds = ds;
  return r;
}

at::Tensor Empty(const at::Tensor& like) { return at::empty({0}, like.options()); }

// _scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, *, attn_mask,
// scale) -> (output, logsumexp)
Stack FlashForCpu(const Args& a) {
  const Attention at = Prepare(a, a.tensor(0), a.tensor(1), a.tensor(2), a.optional_tensor(5),
                               a.boolean(4), a.at(6), a.f64(3));
  const auto [out, lse] = Forward(at, a.tensor(0).scalar_type());
  return oplib::Results({out, lse});
}

// _scaled_dot_product_flash_attention_for_cpu_backward(grad_out, q, k, v, out, logsumexp,
// dropout_p, is_causal, *, attn_mask, scale) -> (grad_query, grad_key, grad_value)
Stack FlashForCpuBackward(const Args& a) {
  const Attention at = Prepare(a, a.tensor(1), a.tensor(2), a.tensor(3), a.optional_tensor(8),
                               a.boolean(7), a.at(9), a.f64(6));
  const Gradients g = Backward(at, a.tensor(0), a.tensor(4), a.tensor(5));
  return oplib::Results({g.dq.to(a.tensor(1).scalar_type()), g.dk.to(a.tensor(2).scalar_type()),
                         g.dv.to(a.tensor(3).scalar_type())});
}

// _scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, return_debug_mask, *,
// scale) -> (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed, philox_offset,
// debug_attn_mask): the kernel's bookkeeping (2-8) as empty tensors and the lengths, not
// compared (server/data/standards.json).
Stack Flash(const Args& a) {
  const at::Tensor& q = a.tensor(0);
  const Attention at =
      Prepare(a, q, a.tensor(1), a.tensor(2), std::nullopt, a.boolean(4), a.at(6), a.f64(3));
  const auto [out, lse] = Forward(at, q.scalar_type());
  Stack r = oplib::Results({out, lse, Empty(q), Empty(q)});
  r.emplace_back(q.size(-2));
  r.emplace_back(a.tensor(1).size(-2));
  for (int i = 0; i < 3; ++i) r.emplace_back(Empty(q));
  return r;
}

// _scaled_dot_product_flash_attention_backward(grad_out, q, k, v, out, logsumexp, cum_seq_q,
// cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale)
Stack FlashBackward(const Args& a) {
  const Attention at = Prepare(a, a.tensor(1), a.tensor(2), a.tensor(3), std::nullopt,
                               a.boolean(11), a.at(14), a.f64(10));
  const Gradients g = Backward(at, a.tensor(0), a.tensor(4), a.tensor(5));
  return oplib::Results({g.dq.to(a.tensor(1).scalar_type()), g.dk.to(a.tensor(2).scalar_type()),
                         g.dv.to(a.tensor(3).scalar_type())});
}

// _scaled_dot_product_efficient_attention(q, k, v, attn_bias, compute_log_sumexp, dropout_p,
// is_causal, *, scale) -> (output, log_sumexp, philox_seed, philox_offset): the CUDA kernel pads
// log_sumexp's length, so it and the bookkeeping are not compared.
Stack Efficient(const Args& a) {
  const at::Tensor& q = a.tensor(0);
  const Attention at = Prepare(a, q, a.tensor(1), a.tensor(2), a.optional_tensor(3), a.boolean(6),
                               a.at(7), a.f64(5));
  const auto [out, lse] = Forward(at, q.scalar_type());
  return oplib::Results({out, a.boolean(4) ? lse : Empty(lse), Empty(q), Empty(q)});
}

// _scaled_dot_product_efficient_attention_backward(grad_out_, q, k, v, attn_bias, out,
// logsumexp, philox_seed, philox_offset, dropout_p, grad_input_mask, is_causal, *, scale) ->
// (grad_query, grad_key, grad_value, grad_bias)
Stack EfficientBackward(const Args& a) {
  const std::optional<at::Tensor> bias = a.optional_tensor(4);
  const Attention at =
      Prepare(a, a.tensor(1), a.tensor(2), a.tensor(3), bias, a.boolean(11), a.at(12), a.f64(9));
  const Gradients g = Backward(at, a.tensor(0), a.tensor(5), a.tensor(6));
  const std::vector<bool> wanted = a.at(10).toBoolList().vec();
  at::Tensor dbias;
  if (bias && bias->defined() && bias->numel() > 0 && wanted.size() == 4 && wanted[3]) {
    dbias = at::sum_to(g.ds, bias->sizes()).to(bias->scalar_type());
  }
  return oplib::Results({g.dq.to(a.tensor(1).scalar_type()), g.dk.to(a.tensor(2).scalar_type()),
                         g.dv.to(a.tensor(3).scalar_type()), dbias});
}

// inductor::_reinterpret_tensor(self, size, stride, offset_increment): a view of self's memory.
// The server has the tensor the call read (its snapshot, laid out from 0), so the view is taken
// over that; one reaching past it (into memory of its storage that was not sent) is refused.
Stack ReinterpretTensor(const Args& a) {
  const at::Tensor& self = a.tensor(0);
  const std::vector<int64_t> size = a.at(1).toIntVector(), stride = a.at(2).toIntVector();
  const int64_t offset = a.i64(3);
  int64_t last = offset;
  for (std::size_t d = 0; d < size.size() && d < stride.size(); ++d) {
    if (size[d] == 0) return oplib::Results({at::empty(size, self.options())});
    last += (size[d] - 1) * stride[d];
  }
  TORCH_CHECK(offset >= 0 && last < self.numel(), a.op_name(), ": a view of elements [", offset,
              ", ", last, "] of a tensor of ", self.numel(),
              " elements reaches past what the training sent");
  return oplib::Results({self.contiguous().as_strided(size, stride, offset).clone()});
}

struct SdpaOp {
  const char* ns;
  const char* schema;              // without the namespace
  const char* name;                // the operator's name, as impl() takes it
  torch::CppFunction (*kernel)();  // oplib::Boxed<&Kernel>
};

std::vector<SdpaOp> Ops() {
  return {
      {"aten",
       "_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, "
       "float dropout_p=0., bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) "
       "-> (Tensor output, Tensor logsumexp)",
       "_scaled_dot_product_flash_attention_for_cpu", &oplib::Boxed<&FlashForCpu>},
      {"aten",
       "_scaled_dot_product_flash_attention_for_cpu_backward(Tensor grad_out, Tensor query, "
       "Tensor key, Tensor value, Tensor out, Tensor logsumexp, float dropout_p, bool is_causal, "
       "*, Tensor? attn_mask=None, float? scale=None) -> (Tensor grad_query, Tensor grad_key, "
       "Tensor grad_value)",
       "_scaled_dot_product_flash_attention_for_cpu_backward", &oplib::Boxed<&FlashForCpuBackward>},
      {"aten",
       "_scaled_dot_product_flash_attention(Tensor query, Tensor key, Tensor value, float "
       "dropout_p=0., bool is_causal=False, bool return_debug_mask=False, *, float? scale=None) "
       "-> (Tensor output, Tensor logsumexp, Tensor cum_seq_q, Tensor cum_seq_k, SymInt max_q, "
       "SymInt max_k, Tensor philox_seed, Tensor philox_offset, Tensor debug_attn_mask)",
       "_scaled_dot_product_flash_attention", &oplib::Boxed<&Flash>},
      {"aten",
       "_scaled_dot_product_flash_attention_backward(Tensor grad_out, Tensor query, Tensor key, "
       "Tensor value, Tensor out, Tensor logsumexp, Tensor cum_seq_q, Tensor cum_seq_k, SymInt "
       "max_q, SymInt max_k, float dropout_p, bool is_causal, Tensor philox_seed, Tensor "
       "philox_offset, *, float? scale=None) -> (Tensor grad_query, Tensor grad_key, Tensor "
       "grad_value)",
       "_scaled_dot_product_flash_attention_backward", &oplib::Boxed<&FlashBackward>},
      {"aten",
       "_scaled_dot_product_efficient_attention(Tensor query, Tensor key, Tensor value, Tensor? "
       "attn_bias, bool compute_log_sumexp, float dropout_p=0., bool is_causal=False, *, float? "
       "scale=None) -> (Tensor output, Tensor log_sumexp, Tensor philox_seed, Tensor "
       "philox_offset)",
       "_scaled_dot_product_efficient_attention", &oplib::Boxed<&Efficient>},
      {"aten",
       "_scaled_dot_product_efficient_attention_backward(Tensor grad_out_, Tensor query, Tensor "
       "key, Tensor value, Tensor attn_bias, Tensor out, Tensor logsumexp, Tensor philox_seed, "
       "Tensor philox_offset, float dropout_p, bool[4] grad_input_mask, bool is_causal=False, *, "
       "float? scale=None) -> (Tensor, Tensor, Tensor, Tensor)",
       "_scaled_dot_product_efficient_attention_backward", &oplib::Boxed<&EfficientBackward>},
      {"inductor",
       "_reinterpret_tensor(Tensor self, int[] size, int[] stride, int offset_increment=0) -> "
       "Tensor",
       "_reinterpret_tensor", &oplib::Boxed<&ReinterpretTensor>},
  };
}

}  // namespace

void RegisterMissingSdpaOps(std::vector<std::string>* added) {
  for (const SdpaOp& op : Ops()) {
    const std::string full = absl::StrCat(op.ns, "::", op.name);
    if (c10::Dispatcher::singleton().findSchema({full, ""})) continue;  // the bench has it
    // Libraries of their own, kept for the life of the process (registration is undone when
    // one is destroyed).
    auto* def =
        new torch::Library(torch::Library::FRAGMENT, op.ns, c10::nullopt, __FILE__, __LINE__);
    def->def(op.schema);
    auto* impl =
        new torch::Library(torch::Library::IMPL, op.ns, c10::DispatchKey::CompositeExplicitAutograd,
                           __FILE__, __LINE__);
    impl->impl(op.name, op.kernel());
    added->push_back(full);
  }
}

}  // namespace parity::server
