// A simulated Ascend NPU for tests: registers torch_npu's schemas (the same data the reference
// library registers) with CPU kernels written independently of oplib/npu: other decompositions
// (division instead of rsqrt, roll-and-sign rotation, flash-style blockwise attention with an
// online softmax, a backward that reuses the forward's softmax statistics as FlashAttention
// does) and autograd kernels that, like torch_npu's, record one autograd node per forward call
// whose backward calls the npu::*_backward / *_grad operator through the dispatcher.
//
// Loaded into a training process with torch.ops.load_library, as `import torch_npu` would load
// torch_npu. Its "device" is the CPU: the tensors are CPU tensors, the kernels are these.
//
// PARITY_NPU_SIM_FAULT plants one fault (tests/faults/npu_fused_faults.py lists them):
//   rms_eps         npu_rms_norm ignores epsilon and uses 1e-5
//   rotary_half     npu_rotary_mul rotates the wrong half: (x2, -x1) instead of (-x2, x1)
//   swiglu_swap     npu_swiglu swaps its halves: silu(b) * a
//   fa_scale        npu_fusion_attention forgets the scale
//   fa_fwd_scale    npu_fusion_attention's forward alone forgets the scale (its grad is right)
//   fa_sparse       npu_fusion_attention applies no causal mask for sparse_mode 2/3
//   fa_pse_after_scale  npu_fusion_attention (and its grad) adds pse after the scale,
//                   scale * q k^T + pse (the API doc example's order, not the kernel's)
//   fa_nomask_causal    npu_fusion_attention (and its grad) applies sparse_mode 2/3's causal mask
//                   when no atten_mask is given (torch_npu computes the whole matrix then)
//   adamw_powers_as_passed  npu_apply_adam_w.out takes the bias corrections from the powers as
//                   passed, not advanced by one step
//   fa_grad_softmax npu_fusion_attention_grad drops the softmax correction rowsum(dO * O)
//   random:SEED     one kernel of the eight (each fused forward and backward) wrong in one way,
//                   both drawn from SEED (RandomFault below); the choice is printed to stderr as
//                   "npu_sim fault: OP PHASE KIND"
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <type_traits>

#include "oplib/support/boxed_kernel.h"
#include "oplib/support/schema_data.h"

extern const char kParityTorchNpuSchemasJson[];

namespace parity::npu_sim {
namespace {

using oplib::Args;
using oplib::Results;
using oplib::Stack;

bool Fault(const char* name) {
  const char* f = std::getenv("PARITY_NPU_SIM_FAULT");
  return f != nullptr && std::strcmp(f, name) == 0;
}

// A fault drawn at random (PARITY_NPU_SIM_FAULT=random:SEED): which kernel, and how it is wrong.
//   sign        every 7th element of output 0 negated
//   scale       output 0 scaled by 1.01
//   swap_halves output 0's last dimension with its halves swapped
//   missing     a term of the kernel's formula dropped: rms_norm's gamma, rotary's sin term,
//               swiglu's silu (a * b), attention's scale; the backwards' second term (rms_norm's
//               projection, rotary's rotated term, swiglu's sigmoid' term, attention's
//               softmax correction)
//   mask_offset attention's causal mask one token late (forward only)
enum class Kernel {
  kRmsNorm,
  kRmsNormGrad,
  kRotary,
  kRotaryGrad,
  kSwiglu,
  kSwigluGrad,
  kFa,
  kFaGrad
};
struct RandomFault {
  Kernel kernel;
  std::string kind;
};

const std::optional<RandomFault>& Random() {
  static const std::optional<RandomFault> fault = []() -> std::optional<RandomFault> {
    const char* f = std::getenv("PARITY_NPU_SIM_FAULT");
    if (f == nullptr || std::strncmp(f, "random:", 7) != 0) return std::nullopt;
    std::mt19937 rng(static_cast<uint32_t>(std::strtoul(f + 7, nullptr, 10)));
    const Kernel kernel = static_cast<Kernel>(std::uniform_int_distribution<int>(0, 7)(rng));
    std::vector<std::string> kinds = {"sign", "scale", "swap_halves", "missing"};
    if (kernel == Kernel::kFa) kinds.push_back("mask_offset");
    const std::string kind =
        kinds[std::uniform_int_distribution<std::size_t>(0, kinds.size() - 1)(rng)];
    static const char* const kNames[] = {
        "npu::npu_rms_norm forward",         "npu::npu_rms_norm_backward backward",
        "npu::npu_rotary_mul forward",       "npu::npu_rotary_mul_backward backward",
        "npu::npu_swiglu forward",           "npu::npu_swiglu_backward backward",
        "npu::npu_fusion_attention forward", "npu::npu_fusion_attention_grad backward"};
    std::fprintf(stderr, "npu_sim fault: %s %s\n", kNames[static_cast<int>(kernel)], kind.c_str());
    return RandomFault{kernel, kind};
  }();
  return fault;
}

// Whether the random fault is `kind` in `kernel`.
bool RandomIs(Kernel kernel, const char* kind) {
  const std::optional<RandomFault>& f = Random();
  return f && f->kernel == kernel && f->kind == kind;
}

// Output 0 of `kernel` with the random fault's generic kinds applied (sign, scale, swap_halves).
Stack Planted(Kernel kernel, Stack out) {
  const std::optional<RandomFault>& f = Random();
  if (!f || f->kernel != kernel) return out;
  at::Tensor y = out[0].toTensor();
  if (f->kind == "sign") {
    at::Tensor flat = y.contiguous().view({-1}).clone();
    flat.slice(0, 0, flat.numel(), 7).neg_();
    y = flat.view(y.sizes());
  } else if (f->kind == "scale") {
    y = (y.to(at::kDouble) * 1.01).to(y.scalar_type());
  } else if (f->kind == "swap_halves") {
    const int64_t half = y.size(-1) / 2;
    y = at::cat({y.narrow(-1, half, y.size(-1) - half), y.narrow(-1, 0, half)}, -1);
  }
  out[0] = y;
  return out;
}

at::Tensor F32(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? t : t.to(at::kFloat);
}

// ---- npu_rms_norm ---------------------------------------------------------------------------

Stack RmsNorm(const Args& a) {
  const at::Tensor& x = a.tensor(0);
  const at::Tensor& gamma = a.tensor(1);
  const double eps = Fault("rms_eps") ? 1e-5 : a.f64(2);
  const at::Tensor xf = F32(x);
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - gamma.dim(); d < x.dim(); ++d) dims.push_back(d);
  const at::Tensor rms =
      at::sqrt((xf * xf).sum(dims, true) / static_cast<double>(gamma.numel()) + eps);
  const at::Tensor g =
      RandomIs(Kernel::kRmsNorm, "missing") ? at::ones_like(F32(gamma)) : F32(gamma);
  return Planted(Kernel::kRmsNorm,
                 Results({(xf / rms * g).to(x.scalar_type()), (1.0 / rms).to(at::kFloat)}));
}

Stack RmsNormBackward(const Args& a) {
  const at::Tensor dy = F32(a.tensor(0)), x = F32(a.tensor(1)), gamma = F32(a.tensor(2)),
                   rstd = F32(a.tensor(3));
  const int64_t n = gamma.numel();
  const at::Tensor rows_x = x.reshape({-1, n}), rows_dy = dy.reshape({-1, n}),
                   rows_r = rstd.reshape({-1, 1}), g = gamma.reshape({1, n});
  const at::Tensor xhat = rows_x * rows_r;
  const at::Tensor dgamma = (rows_dy * xhat).sum(0).reshape(gamma.sizes());
  const at::Tensor gy = rows_dy * g;
  const at::Tensor dot = (gy * rows_x).sum(1, true);
  at::Tensor dx = gy * rows_r;
  if (!RandomIs(Kernel::kRmsNormGrad, "missing")) {
    dx = dx - rows_x * rows_r.pow(3) * dot / static_cast<double>(n);
  }
  return Planted(Kernel::kRmsNormGrad, Results({dx.reshape(x.sizes()).to(a.tensor(1).scalar_type()),
                                                dgamma.to(at::kFloat)}));
}

// ---- npu_rotary_mul ("half" mode) ----------------------------------------------------------

// rotate_half as a roll by d/2 and a sign: (-x2, x1); the fault gives (x2, -x1).
at::Tensor RotateBySign(const at::Tensor& x, bool wrong_half) {
  const int64_t d = x.size(-1);
  at::Tensor sign = at::ones({d}, x.options());
  sign.narrow(0, wrong_half ? d / 2 : 0, d / 2).fill_(-1);
  return at::roll(x, d / 2, -1) * sign;
}

// The rotation of rotary_mode: "half" as above; "interleave" each pair (x0, x1) -> (-x1, x0), as
// a flip of the pair and a sign. Both are antisymmetric: their transpose is -Rotate.
at::Tensor Rotate(const at::Tensor& x, const std::string& mode, bool wrong_half) {
  if (mode == "half") return RotateBySign(x, wrong_half);
  TORCH_CHECK(mode == "interleave", "npu_sim: rotary_mode '", mode, "' is not simulated");
  std::vector<int64_t> pairs(x.sizes().begin(), x.sizes().end() - 1);
  pairs.push_back(x.size(-1) / 2);
  pairs.push_back(2);
  const at::Tensor sign = at::tensor({-1.0, 1.0}, x.options());
  return (x.reshape(pairs).flip(-1) * sign).reshape(x.sizes());
}

Stack RotaryMul(const Args& a) {
  const at::Tensor x = F32(a.tensor(0));
  at::Tensor y = x * F32(a.tensor(1));
  if (!RandomIs(Kernel::kRotary, "missing")) {
    y = y + Rotate(x, a.str(3), Fault("rotary_half")) * F32(a.tensor(2));
  }
  return Planted(Kernel::kRotary, Results({y.to(a.tensor(0).scalar_type())}));
}

Stack RotaryMulBackward(const Args& a) {
  const at::Tensor g = F32(a.tensor(0)), x = F32(a.tensor(1)), r1 = F32(a.tensor(2)),
                   r2 = F32(a.tensor(3));
  const std::string mode = a.str(4);
  // rotate is (x1, x2) -> (-x2, x1); its transpose, (g1, g2) -> (g2, -g1), is -rotate.
  const at::Tensor dx =
      RandomIs(Kernel::kRotaryGrad, "missing") ? g * r1 : g * r1 - Rotate(g * r2, mode, false);
  const at::Tensor dr1 = at::sum_to(g * x, r1.sizes());
  const at::Tensor dr2 = at::sum_to(g * Rotate(x, mode, false), r2.sizes());
  return Planted(Kernel::kRotaryGrad,
                 Results({dx.to(a.tensor(1).scalar_type()), dr1.to(a.tensor(2).scalar_type()),
                          dr2.to(a.tensor(3).scalar_type())}));
}

// ---- npu_swiglu -----------------------------------------------------------------------------

Stack Swiglu(const Args& a) {
  const at::Tensor x = F32(a.tensor(0));
  const int64_t dim = a.i64(1), half = x.size(dim) / 2;
  at::Tensor first = x.narrow(dim, 0, half), second = x.narrow(dim, half, half);
  if (Fault("swiglu_swap")) std::swap(first, second);
  const at::Tensor gate =
      RandomIs(Kernel::kSwiglu, "missing") ? first : first / (1 + at::exp(-first));
  return Planted(Kernel::kSwiglu, Results({(gate * second).to(a.tensor(0).scalar_type())}));
}

Stack SwigluBackward(const Args& a) {
  const at::Tensor g = F32(a.tensor(0)), x = F32(a.tensor(1));
  const int64_t dim = a.i64(2), half = x.size(dim) / 2;
  const at::Tensor p = x.narrow(dim, 0, half), q = x.narrow(dim, half, half);
  const at::Tensor sig = 1 / (1 + at::exp(-p));
  const at::Tensor dp =
      RandomIs(Kernel::kSwigluGrad, "missing") ? g * q * sig : g * q * (sig + p * sig * (1 - sig));
  return Planted(Kernel::kSwigluGrad,
                 Results({at::cat({dp, g * p * sig}, dim).to(a.tensor(1).scalar_type())}));
}

// ---- npu_fusion_attention: per head, key blocks of 16 with an online softmax -----------------

constexpr int64_t kBlock = 16;

struct Attn {
  int64_t heads = 0;
  std::string layout;
  std::optional<at::Tensor> mask;  // the given atten_mask: without one, no mode masks anything
  std::optional<at::Tensor> pse;   // (B or 1, N or 1, S1 or 1, S2), in float32
  double scale = 1.0;
  int64_t sparse_mode = 0;
  int64_t pre = 0, next = 0;  // sparse_mode 4's band
};

// pse's row for (b, h, i) against keys [j0, j0 + len); empty when there is none.
at::Tensor PseRow(const Attn& o, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t len) {
  if (!o.pse) return {};
  const at::Tensor& p = *o.pse;
  return p[p.size(0) == 1 ? 0 : b][p.size(1) == 1 ? 0 : h][p.size(2) == 1 ? 0 : i].narrow(0, j0,
                                                                                          len);
}

// One query row's scores against a key block: (k q + pse) * scale, torch_npu's order (pse type 1).
at::Tensor Scores(const Attn& o, const at::Tensor& keys, const at::Tensor& query,
                  const at::Tensor& pse_row) {
  at::Tensor s = at::mv(keys, query);
  if (!pse_row.defined()) return s * o.scale;
  if (Fault("fa_pse_after_scale")) return s * o.scale + pse_row;
  return (s + pse_row) * o.scale;
}

// -> (B, N, S, D)
at::Tensor Bnsd(const at::Tensor& x, const std::string& layout, int64_t heads) {
  if (layout == "BNSD") return x;
  if (layout == "BSND") return x.transpose(1, 2);
  if (layout == "BSH") return x.view({x.size(0), x.size(1), heads, -1}).transpose(1, 2);
  TORCH_CHECK(layout == "SBH", "npu_sim: layout ", layout, " is not simulated");
  return x.view({x.size(0), x.size(1), heads, -1}).permute({1, 2, 0, 3});
}

at::Tensor FromBnsd(const at::Tensor& x, const std::string& layout) {
  if (layout == "BNSD") return x.contiguous();
  if (layout == "BSND") return x.transpose(1, 2).contiguous();
  if (layout == "BSH") return x.transpose(1, 2).reshape({x.size(0), x.size(2), -1});
  return x.permute({2, 0, 1, 3}).reshape({x.size(2), x.size(0), -1});
}

// Is (row i, column j) masked? For one query row against a key block [j0, j0 + len).
at::Tensor MaskRow(const Attn& o, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t len,
                   int64_t s1, int64_t s2, bool forward = false) {
  at::Tensor m = at::zeros({len}, at::kBool);
  // With no atten_mask no mode masks anything (torch_npu's doc, the sparse_mode constraints).
  if (!o.mask && !Fault("fa_nomask_causal")) return m;
  const bool causal = (o.sparse_mode == 2 || o.sparse_mode == 3) && !Fault("fa_sparse");
  if (causal) {
    const int64_t late = forward && RandomIs(Kernel::kFa, "mask_offset") ? 1 : 0;
    const int64_t shift = (o.sparse_mode == 3 ? s2 - s1 : 0) + late;
    for (int64_t j = 0; j < len; ++j) {
      if (j0 + j > i + shift) m[j] = true;
    }
  }
  if (o.sparse_mode == 4) {  // the band between pre and next tokens, from the bottom-right
    for (int64_t j = 0; j < len; ++j) {
      const int64_t d = j0 + j - i - (s2 - s1);
      if (d > o.next || -d > o.pre) m[j] = true;
    }
  }
  if ((o.sparse_mode == 0 || o.sparse_mode == 1) && o.mask) {
    at::Tensor given = o.mask->to(at::kBool);
    while (given.dim() < 4) given = given.unsqueeze(0);
    given = given.select(0, given.size(0) == 1 ? 0 : b).select(0, given.size(1) == 1 ? 0 : h);
    m = m.logical_or(given.select(0, i).narrow(0, j0, len));
  }
  return m;
}

Attn ReadAttn(const Args& a, std::size_t base, std::size_t after_mask, std::size_t sparse) {
  Attn o;
  o.heads = a.i64(3 + base);
  o.layout = a.str(4 + base);
  o.mask = a.optional_tensor(7 + base);
  o.scale = Fault("fa_scale") ? 1.0 : a.f64(after_mask);
  TORCH_CHECK(a.f64(after_mask + 1) == 1.0, "npu_sim: keep_prob < 1 is not simulated");
  if (const std::optional<at::Tensor> pse = a.optional_tensor(5 + base)) o.pse = F32(*pse);
  o.pre = a.i64(after_mask + 2);
  o.next = a.i64(after_mask + 3);
  o.sparse_mode = a.i64(sparse);
  TORCH_CHECK(o.sparse_mode >= 0 && o.sparse_mode <= 4, "npu_sim: sparse_mode ", o.sparse_mode,
              " is not simulated");
  return o;
}

int64_t KvHeads(const at::Tensor& q, const at::Tensor& k, const Attn& o) {
  if (o.layout == "BSH" || o.layout == "SBH") return k.size(2) / (q.size(2) / o.heads);
  return 0;
}

Stack FusionAttention(const Args& a) {
  Attn o = ReadAttn(a, 0, 8, 16);
  if (Fault("fa_fwd_scale") || RandomIs(Kernel::kFa, "missing")) o.scale = 1.0;
  const at::Tensor q = Bnsd(F32(a.tensor(0)), o.layout, o.heads);
  const at::Tensor k = Bnsd(F32(a.tensor(1)), o.layout, KvHeads(a.tensor(0), a.tensor(1), o));
  const at::Tensor v = Bnsd(F32(a.tensor(2)), o.layout, KvHeads(a.tensor(0), a.tensor(2), o));
  const int64_t B = q.size(0), N = q.size(1), S1 = q.size(2), S2 = k.size(2);
  const int64_t group = N / k.size(1);
  at::Tensor out = at::zeros({B, N, S1, v.size(3)}, q.options());
  at::Tensor row_max = at::empty({B, N, S1}, q.options()),
             row_sum = at::empty({B, N, S1}, q.options());
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < N; ++h) {
      const at::Tensor qh = q[b][h], kh = k[b][h / group], vh = v[b][h / group];
      for (int64_t i = 0; i < S1; ++i) {
        double m = -std::numeric_limits<double>::infinity(), l = 0;
        at::Tensor acc = at::zeros({v.size(3)}, q.options());
        for (int64_t j0 = 0; j0 < S2; j0 += kBlock) {
          const int64_t len = std::min(kBlock, S2 - j0);
          at::Tensor s = Scores(o, kh.narrow(0, j0, len), qh[i], PseRow(o, b, h, i, j0, len));
          s = s.masked_fill(MaskRow(o, b, h, i, j0, len, S1, S2, /*forward=*/true), -INFINITY);
          const double block_max = s.max().item<double>();
          if (std::isinf(block_max)) continue;
          const double m_new = std::max(m, block_max);
          const double correction = std::exp(m - m_new);
          const at::Tensor p = at::exp(s - m_new);
          l = l * correction + p.sum().item<double>();
          acc = acc * correction + at::mv(vh.narrow(0, j0, len).t(), p);
          m = m_new;
        }
        out[b][h][i] = l > 0 ? acc / l : acc;
        row_max[b][h][i] = m;
        row_sum[b][h][i] = l;
      }
    }
  }
  auto stats = [](const at::Tensor& t) {
    return t.unsqueeze(-1).expand({t.size(0), t.size(1), t.size(2), 8}).to(at::kFloat).contiguous();
  };
  const at::Tensor& q_in = a.tensor(0);
  Stack r =
      Planted(Kernel::kFa, Results({FromBnsd(out, o.layout).to(q_in.scalar_type()), stats(row_max),
                                    stats(row_sum), at::empty({0}, q_in.options())}));
  for (int64_t v_ : {int64_t{1234}, int64_t{0}, B * N * S1 * S2})
    r.emplace_back(v_);  // seed, offset, numels
  return r;
}

// FlashAttention's backward: P rebuilt from the forward's row max and sum, D = rowsum(dO * O).
Stack FusionAttentionGrad(const Args& a) {
  const Attn o = ReadAttn(a, 1, 13, 24);
  const at::Tensor& q_in = a.tensor(0);
  const int64_t kvh = KvHeads(q_in, a.tensor(1), o);
  const at::Tensor q = Bnsd(F32(q_in), o.layout, o.heads);
  const at::Tensor k = Bnsd(F32(a.tensor(1)), o.layout, kvh);
  const at::Tensor v = Bnsd(F32(a.tensor(2)), o.layout, kvh);
  const at::Tensor dy = Bnsd(F32(a.tensor(3)), o.layout, o.heads);
  const std::optional<at::Tensor> smax = a.optional_tensor(9), ssum = a.optional_tensor(10),
                                  attn = a.optional_tensor(12);
  TORCH_CHECK(smax && ssum && attn,
              "npu_sim: the grad needs softmax_max, softmax_sum, attention_in");
  const at::Tensor out = Bnsd(F32(*attn), o.layout, o.heads);
  const int64_t B = q.size(0), N = q.size(1), S1 = q.size(2), S2 = k.size(2);
  const int64_t group = N / k.size(1);
  at::Tensor dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
  at::Tensor dpse = o.pse ? at::zeros_like(*o.pse) : at::Tensor();
  const bool drop_correction = Fault("fa_grad_softmax") || RandomIs(Kernel::kFaGrad, "missing");
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < N; ++h) {
      const at::Tensor qh = q[b][h], kh = k[b][h / group], vh = v[b][h / group];
      for (int64_t i = 0; i < S1; ++i) {
        const double m = (*smax)[b][h][i][0].item<double>(), l = (*ssum)[b][h][i][0].item<double>();
        if (!(l > 0)) continue;
        const double d = drop_correction ? 0.0 : (dy[b][h][i] * out[b][h][i]).sum().item<double>();
        for (int64_t j0 = 0; j0 < S2; j0 += kBlock) {
          const int64_t len = std::min(kBlock, S2 - j0);
          at::Tensor s = Scores(o, kh.narrow(0, j0, len), qh[i], PseRow(o, b, h, i, j0, len));
          s = s.masked_fill(MaskRow(o, b, h, i, j0, len, S1, S2), -INFINITY);
          const at::Tensor p = at::exp(s - m) / l;
          dv[b][h / group].narrow(0, j0, len).add_(at::outer(p, dy[b][h][i]));
          const at::Tensor dp = at::mv(vh.narrow(0, j0, len), dy[b][h][i]);
          const at::Tensor ds = p * (dp - d) * o.scale;
          dq[b][h][i].add_(at::mv(kh.narrow(0, j0, len).t(), ds));
          dk[b][h / group].narrow(0, j0, len).add_(at::outer(ds, qh[i]));
          if (dpse.defined()) {  // d/d pse = d/d (q k^T) = ds, or ds / scale when pse is added
                                 // after
            const at::Tensor dp_row = Fault("fa_pse_after_scale") ? ds / o.scale : ds;
            dpse[dpse.size(0) == 1 ? 0 : b][dpse.size(1) == 1 ? 0 : h][dpse.size(2) == 1 ? 0 : i]
                .narrow(0, j0, len)
                .add_(dp_row);
          }
        }
      }
    }
  }
  return Planted(Kernel::kFaGrad, Results({FromBnsd(dq, o.layout).to(q_in.scalar_type()),
                                           FromBnsd(dk, o.layout).to(a.tensor(1).scalar_type()),
                                           FromBnsd(dv, o.layout).to(a.tensor(2).scalar_type()),
                                           dpse.defined() ? dpse.to(a.tensor(6).scalar_type())
                                                          : at::empty({0}, q_in.options())}));
}

// ---- npu_apply_adam_w.out: op-plugin's golden (test/test_base_ops/test_apply_adam_w.py) -------
// m_t = m * beta1 - (beta1 - 1) * g, v_t likewise, the powers advanced one step before the bias
// corrections; written into var, m and v as the .out overload does.
Stack ApplyAdamWOut(const Args& a) {
  const double b1p = a.f64(0), b2p = a.f64(1), lr = a.f64(2), wd = a.f64(3), b1 = a.f64(4),
               b2 = a.f64(5), eps = a.f64(6);
  const bool amsgrad = a.optional_bool(9).value_or(false);
  const bool maximize = a.optional_bool(10).value_or(false);
  at::Tensor var = a.tensor(11), m = a.tensor(12), v = a.tensor(13);
  const at::Tensor g = maximize ? -F32(a.tensor(7)) : F32(a.tensor(7));
  const at::Tensor m_t = F32(m) * b1 - g * (b1 - 1);
  const at::Tensor v_t = F32(v) * b2 - g * g * (b2 - 1);
  const bool as_passed = Fault("adamw_powers_as_passed");
  const double c1 = 1 - (as_passed ? b1p : b1p * b1), c2 = 1 - (as_passed ? b2p : b2p * b2);
  const at::Tensor second = amsgrad ? at::maximum(F32(*a.optional_tensor(8)), v_t) : v_t;
  const at::Tensor updated =
      F32(var) * (1 - lr * wd) - m_t * lr / c1 / (at::sqrt(second / c2) + eps);
  var.copy_(updated);
  m.copy_(m_t);
  v.copy_(v_t);
  return Results({var, m, v});
}

// ---- autograd: one node per forward call, as torch_npu's generated autograd kernels ----------

using torch::autograd::variable_list;

// Calls a backward operator through the dispatcher (so a checker hooked on the dispatcher sees
// it inside this node's backward, as it would see torch_npu's).
Stack CallOp(const char* name, Stack args) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  op.callBoxed(&args);
  return args;
}

class SimNode;
// libtorch's autograd nodes are held by std::shared_ptr, and by c10::intrusive_ptr in recent
// torch 2.x (2.15): the simulated NPU's node is made the way its torch holds nodes.
constexpr bool kIntrusiveNodes =
    std::is_base_of_v<c10::intrusive_ptr_target, torch::autograd::Node>;
using NodePtr =
    std::conditional_t<kIntrusiveNodes, c10::intrusive_ptr<SimNode>, std::shared_ptr<SimNode>>;

class SimNode : public torch::autograd::Node {
 public:
  using Backward = std::function<variable_list(const variable_list&)>;
  SimNode(std::string name, Backward backward)
      : name_(std::move(name)), backward_(std::move(backward)) {}
  std::string name() const override { return name_; }
  void set_backward(Backward backward) { backward_ = std::move(backward); }
  variable_list apply(variable_list&& grads) override {
    variable_list out = backward_(grads);
    backward_ = nullptr;  // saved tensors go with it
    return out;
  }
  void release_variables() override { backward_ = nullptr; }

 private:
  std::string name_;
  Backward backward_;
};

template <typename N = SimNode>  // a template: the branch not taken is not compiled
NodePtr MakeNode(const std::string& name) {
  if constexpr (kIntrusiveNodes) {
    return c10::make_intrusive<N>(name, nullptr);
  } else {
    return std::make_shared<N>(name, nullptr);
  }
}

// Runs `forward` (below autograd) and, when grad mode is on and an input in `differentiable`
// needs a gradient, links output 0 to a node running `backward`.
template <oplib::Kernel forward>
void WithAutograd(const c10::OperatorHandle& op, Stack* stack,
                  const std::vector<std::size_t>& differentiable, const char* node_name,
                  std::function<SimNode::Backward(const Args&, const Stack&)> make_backward) {
  const std::size_t n = op.schema().arguments().size();
  const Args args(op, Stack(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end()));
  stack->erase(stack->end() - static_cast<std::ptrdiff_t>(n), stack->end());
  variable_list inputs;
  bool needs_grad = false;
  for (std::size_t i : differentiable) {
    if (!args.at(i).isTensor()) continue;  // an optional input not given (pse): no edge
    inputs.push_back(args.tensor(i));
    needs_grad = needs_grad || args.tensor(i).requires_grad();
  }
  needs_grad = needs_grad && at::GradMode::is_enabled();
  NodePtr node;
  if (needs_grad) {
    // Created before the kernel runs: the sequence number the dispatcher's record of this call
    // saw (what links its backward calls to it).
    node = MakeNode(node_name);
    node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  }
  Stack results;
  {
    at::AutoDispatchBelowADInplaceOrView below;
    results = forward(args);
  }
  if (node) {
    at::Tensor out = results[0].toTensor();
    torch::autograd::set_history(out, node);
    results[0] = out;
    Stack detached;
    for (const c10::IValue& r : results) {
      detached.push_back(r.isTensor() ? c10::IValue(r.toTensor().detach()) : r);
    }
    node->set_backward(make_backward(args, detached));
  }
  for (c10::IValue& r : results) stack->push_back(std::move(r));
}

void RmsNormAutograd(const c10::OperatorHandle& op, Stack* stack) {
  WithAutograd<&RmsNorm>(
      op, stack, {0, 1}, "NpuRmsNormBackward0",
      [](const Args& a, const Stack& r) -> SimNode::Backward {
        const at::Tensor x = a.tensor(0).detach(), g = a.tensor(1).detach(), rstd = r[1].toTensor();
        return [=](const variable_list& grads) -> variable_list {
          Stack out = CallOp("npu::npu_rms_norm_backward", {grads[0], x, g, rstd});
          return {out[0].toTensor(), out[1].toTensor()};
        };
      });
}

void RotaryMulAutograd(const c10::OperatorHandle& op, Stack* stack) {
  WithAutograd<&RotaryMul>(
      op, stack, {0, 1, 2}, "NpuRotaryMulBackward0",
      [](const Args& a, const Stack&) -> SimNode::Backward {
        const at::Tensor x = a.tensor(0).detach(), r1 = a.tensor(1).detach(),
                         r2 = a.tensor(2).detach();
        const std::string mode = a.str(3);
        return [=](const variable_list& grads) -> variable_list {
          Stack out = CallOp("npu::npu_rotary_mul_backward", {grads[0], x, r1, r2, mode});
          return {out[0].toTensor(), out[1].toTensor(), out[2].toTensor()};
        };
      });
}

void SwigluAutograd(const c10::OperatorHandle& op, Stack* stack) {
  WithAutograd<&Swiglu>(
      op, stack, {0}, "NpuSwigluBackward0", [](const Args& a, const Stack&) -> SimNode::Backward {
        const at::Tensor x = a.tensor(0).detach();
        const int64_t dim = a.i64(1);
        return [=](const variable_list& grads) -> variable_list {
          return {CallOp("npu::npu_swiglu_backward", {grads[0], x, dim})[0].toTensor()};
        };
      });
}

void FusionAttentionAutograd(const c10::OperatorHandle& op, Stack* stack) {
  WithAutograd<&FusionAttention>(
      op, stack, {0, 1, 2, 5}, "NpuFusionAttentionBackward0",
      [](const Args& a, const Stack& r) -> SimNode::Backward {
        Stack saved;  // the forward's arguments
        for (std::size_t i = 0; i < a.size(); ++i) {
          const c10::IValue& v = a.at(i);
          saved.push_back(
              v.isTensor() && v.toTensor().defined() ? c10::IValue(v.toTensor().detach()) : v);
        }
        const Stack results = r;
        return [saved, results](const variable_list& grads) -> variable_list {
          // npu_fusion_attention_grad(q, k, v, dy, head_num, input_layout, *, pse, padding_mask,
          // atten_mask, softmax_max, softmax_sum, softmax_in, attention_in, scale_value, keep_prob,
          // pre_tockens, next_tockens, inner_precise, seed, offset, numels, prefix,
          // actual_seq_qlen, actual_seq_kvlen, sparse_mode, gen_mask_parallel, sync)
          Stack args = {saved[0],   saved[1],   saved[2],   grads[0],   saved[3],   saved[4],
                        saved[5],   saved[6],   saved[7],   results[1], results[2], results[3],
                        results[0], saved[8],   saved[9],   saved[10],  saved[11],  saved[12],
                        results[4], results[5], results[6], saved[13],  saved[14],  saved[15],
                        saved[16],  saved[17],  saved[18]};
          Stack out = CallOp("npu::npu_fusion_attention_grad", std::move(args));
          if (!saved[5].isTensor())
            return {out[0].toTensor(), out[1].toTensor(), out[2].toTensor()};
          return {out[0].toTensor(), out[1].toTensor(), out[2].toTensor(), out[3].toTensor()};
        };
      });
}

TORCH_LIBRARY_FRAGMENT(npu, m) {
  // torch_npu declares one form of each operator: the release_* overloads are the reference
  // library's own (an older release's form), not the device's.
  oplib::SchemaData data = oplib::ParseSchemaData(kParityTorchNpuSchemasJson);
  data.schemas.erase(
      std::remove_if(data.schemas.begin(), data.schemas.end(),
                     [](const std::string& s) { return s.find(".release_") != std::string::npos; }),
      data.schemas.end());
  oplib::DefineSchemas(m, data);
}

TORCH_LIBRARY_IMPL(npu, CPU, m) {
  m.impl("npu_rms_norm", oplib::Boxed<&RmsNorm>());
  m.impl("npu_rms_norm_backward", oplib::Boxed<&RmsNormBackward>());
  m.impl("npu_rotary_mul", oplib::Boxed<&RotaryMul>());
  m.impl("npu_rotary_mul_backward", oplib::Boxed<&RotaryMulBackward>());
  m.impl("npu_swiglu", oplib::Boxed<&Swiglu>());
  m.impl("npu_swiglu_backward", oplib::Boxed<&SwigluBackward>());
  m.impl("npu_fusion_attention", oplib::Boxed<&FusionAttention>());
  m.impl("npu_fusion_attention_grad", oplib::Boxed<&FusionAttentionGrad>());
  m.impl("npu_apply_adam_w.out", oplib::Boxed<&ApplyAdamWOut>());
}

TORCH_LIBRARY_IMPL(npu, Autograd, m) {
  m.impl("npu_rms_norm", torch::CppFunction::makeFromBoxedFunction<&RmsNormAutograd>());
  m.impl("npu_rotary_mul", torch::CppFunction::makeFromBoxedFunction<&RotaryMulAutograd>());
  m.impl("npu_swiglu", torch::CppFunction::makeFromBoxedFunction<&SwigluAutograd>());
  m.impl("npu_fusion_attention",
         torch::CppFunction::makeFromBoxedFunction<&FusionAttentionAutograd>());
}

}  // namespace
}  // namespace parity::npu_sim
