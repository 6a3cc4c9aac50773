// npu_fusion_attention and npu_fusion_attention_grad: softmax(scale * (q k^T + pse), masked) v,
// in float32 for low-precision inputs as the NPU kernel computes, in float64 for the golden. The
// forward rebuilds the softmax from Q and K. The grad computes from what the real kernel is given:
// the forward's softmax_max / softmax_sum (P = exp(S - max) / sum) and its output attention_in
// (the softmax correction rowsum(dY * O)), never recomputing them; only when the call carries
// none (empty tensors) does it rebuild them from Q, K and V. A faulty forward then does not make
// its correct backward an error: the backward is judged on the statistics it was handed.
//
// Layouts BSH, SBH, BSND, BNSD and TND (varlen, with the cumulative actual_seq_qlen /
// actual_seq_kvlen); grouped-query K/V (N_kv dividing N); atten_mask true = masked; sparse_mode 0
// (mask and/or pre/next band), 1 (full mask), 2 (causal, top-left), 3 (causal, bottom-right),
// 4 (band, bottom-right), each only with an atten_mask (BlockMask). pse is added before the
// scale, scale * (q k^T + pse): the aclnn kernels' pse type 1, which op-plugin passes for
// npu_fusion_attention on every SoC and release (6.0 to master: FlashAttentionKernelNpuOpApi.cpp,
// aclnnFlashAttentionScore or DEFAULT_PSE_TYPE = 1), the API doc's formula and msprobe's own bench
// function (calculate_qk); the API doc's pse example computes softmax(scale * q k^T + pse), the
// other type, with a pse of 0.01 * randn that cannot tell the two apart. Modes 5-8 (prefix and
// varlen-compressed variants) and keep_prob < 1 (the dropout mask comes from the device's generator
// and cannot be rebuilt) are refused with a reason, which the server reports as SKIP.
#include "absl/strings/str_cat.h"
#include "oplib/npu/kernels.h"

namespace parity::oplib::npu {
namespace {

constexpr int64_t kStatsWidth = 8;  // softmax_max / softmax_sum repeat each row's value 8 times

struct Options {
  int64_t head_num = 0;
  std::string layout;
  std::optional<at::Tensor> pse, atten_mask;
  double scale = 1.0;
  double keep_prob = 1.0;
  int64_t pre_tokens = 0, next_tokens = 0;
  std::optional<std::vector<int64_t>> seq_q, seq_kv;  // cumulative, TND only
  int64_t sparse_mode = 0;
};

void Validate(const Options& o, const std::string& op) {
  TORCH_CHECK(o.keep_prob == 1.0, op, ": keep_prob ", o.keep_prob,
              " < 1 applies a dropout mask drawn from the device's generator (seed, offset), "
              "which the reference cannot rebuild");
  TORCH_CHECK(o.sparse_mode >= 0 && o.sparse_mode <= 4, op, ": sparse_mode ", o.sparse_mode,
              " is not supported by the reference (0-4 are)");
  TORCH_CHECK(o.head_num > 0, op, ": head_num must be positive, got ", o.head_num);
  static const char* const kLayouts[] = {"BSH", "SBH", "BSND", "BNSD", "TND"};
  bool known = false;
  for (const char* l : kLayouts) known = known || o.layout == l;
  TORCH_CHECK(known, op, ": input_layout '", o.layout, "' is not one of BSH, SBH, BSND, BNSD, TND");
  TORCH_CHECK(o.layout != "TND" || (o.seq_q && o.seq_kv), op,
              ": TND needs actual_seq_qlen and actual_seq_kvlen");
  TORCH_CHECK(o.layout != "TND" || !o.pse, op, ": pse with TND is not supported by the reference");
}

// x in `layout` -> (B, N, S, D); `heads` is N for BSH/SBH (where H = N * D).
at::Tensor ToBNSD(const at::Tensor& x, const std::string& layout, int64_t heads) {
  if (layout == "BNSD") return x;
  if (layout == "BSND") return x.permute({0, 2, 1, 3});
  if (layout == "BSH") return x.reshape({x.size(0), x.size(1), heads, -1}).permute({0, 2, 1, 3});
  if (layout == "SBH") return x.reshape({x.size(0), x.size(1), heads, -1}).permute({1, 2, 0, 3});
  return x.permute({1, 0, 2}).unsqueeze(0);  // TND slice -> (1, N, T, D)
}

// (B, N, S, D) -> `layout` (TND: (T, N, D) of the single batch).
at::Tensor FromBNSD(const at::Tensor& x, const std::string& layout) {
  if (layout == "BNSD") return x.contiguous();
  if (layout == "BSND") return x.permute({0, 2, 1, 3}).contiguous();
  if (layout == "BSH") return x.permute({0, 2, 1, 3}).reshape({x.size(0), x.size(2), -1});
  if (layout == "SBH") return x.permute({2, 0, 1, 3}).reshape({x.size(2), x.size(0), -1});
  return x.squeeze(0).permute({1, 0, 2}).contiguous();
}

// Heads of K or V in a BSH/SBH layout: H_kv / D with D from the query.
int64_t KvHeads(const at::Tensor& q, const at::Tensor& kv, const Options& o) {
  if (o.layout == "BSH" || o.layout == "SBH") {
    const int64_t d = q.size(2) / o.head_num;
    TORCH_CHECK(d > 0 && q.size(2) % o.head_num == 0 && kv.size(2) % d == 0,
                "npu_fusion_attention: hidden sizes ", q.size(2), " / ", kv.size(2),
                " do not split into heads of ", d);
    return kv.size(2) / d;
  }
  return 0;  // explicit in the shape
}

// The mask (true = masked) of one (S1, S2) block for the call's sparse_mode, broadcastable
// against (B, N, S1, S2). Without an atten_mask there is none, whatever sparse_mode, pre_tockens
// and next_tockens say: torch_npu's API doc (op-plugin/docs/zh/custom_APIs/torch_npu/
// torch_npu-npu_fusion_attention.md, the sparse_mode constraints: with atten_mask None they take
// no effect and the whole score matrix is computed).
std::optional<at::Tensor> BlockMask(const Options& o, const std::optional<at::Tensor>& given,
                                    int64_t s1, int64_t s2, const at::TensorOptions& device) {
  if (!given) return std::nullopt;
  const at::Tensor i = at::arange(s1, device.dtype(at::kLong)).unsqueeze(1);
  const at::Tensor j = at::arange(s2, device.dtype(at::kLong)).unsqueeze(0);
  auto band = [&](int64_t shift) {  // masked where j - i - shift > next or i + shift - j > pre
    const at::Tensor d = j - i - shift;
    return (d > o.next_tokens).logical_or(-d > o.pre_tokens);
  };
  switch (o.sparse_mode) {
    case 0: {
      return band(0).logical_or(given->to(at::kBool));
    }
    case 1:
      return given->to(at::kBool);
    case 2:
      return j > i;
    case 3:
      return j - i > s2 - s1;
    default:  // 4
      return band(s2 - s1);
  }
}

struct Block {                     // one attention problem in (B, N, S, D)
  at::Tensor q, k, v;              // compute dtype; k and v already repeated to N heads
  std::optional<at::Tensor> mask;  // broadcastable to (B, N, S1, S2)
  std::optional<at::Tensor> pse;
  int64_t group = 1;  // N / N_kv
};

// Softmax probabilities and the raw row max/sum (for the statistics outputs).
struct Softmax {
  at::Tensor p, max, sum;
};

Softmax Probabilities(const Block& b, double scale) {
  at::Tensor s = at::matmul(b.q, b.k.transpose(-1, -2));
  if (b.pse) s = s + *b.pse;
  s = s * scale;
  if (b.mask) s = s.masked_fill(*b.mask, -std::numeric_limits<double>::infinity());
  Softmax out;
  out.max = s.amax(-1, true);
  // A fully masked row has max -inf: it attends to nothing and its output is 0.
  const at::Tensor safe_max = at::where(at::isinf(out.max), at::zeros_like(out.max), out.max);
  const at::Tensor e = at::exp(s - safe_max);
  out.sum = e.sum(-1, true);
  out.p = at::where(out.sum > 0, e / out.sum, at::zeros_like(e));
  return out;
}

// The softmax the grad kernel uses: from the forward's row statistics max and sum ((B, N, S1, 1),
// in the compute dtype), P = exp(S - max) / sum over the unmasked scores, 0 where sum is not
// positive (a row that attends to nothing).
at::Tensor ProbabilitiesFromStats(const Block& b, double scale, const at::Tensor& max,
                                  const at::Tensor& sum) {
  at::Tensor s = at::matmul(b.q, b.k.transpose(-1, -2));
  if (b.pse) s = s + *b.pse;
  s = s * scale;
  if (b.mask) s = s.masked_fill(*b.mask, -std::numeric_limits<double>::infinity());
  const at::Tensor live = (sum > 0).logical_and(at::isfinite(max));
  const at::Tensor safe_max = at::where(live, max, at::zeros_like(max));
  const at::Tensor safe_sum = at::where(live, sum, at::ones_like(sum));
  return at::where(live, at::exp(s - safe_max) / safe_sum, at::zeros_like(s));
}

// A statistics tensor of the forward ((B, N, S1, 8); TND: (T, N, 8)) as (B, N, S1, 1) rows of one
// problem, in `ct`; nullopt when the call carries none.
std::optional<at::Tensor> StatRows(const std::optional<at::Tensor>& stats,
                                   const std::string& layout, int64_t q_start, int64_t q_len,
                                   at::ScalarType ct) {
  if (!stats || !stats->defined() || stats->numel() == 0) return std::nullopt;
  at::Tensor t = *stats;
  if (layout == "TND") t = t.narrow(0, q_start, q_len).permute({1, 0, 2}).unsqueeze(0);
  return t.narrow(-1, 0, 1).to(ct);
}

// (B, N, S, D) with N = N_kv * group -> summed over each group -> (B, N_kv, S, D).
at::Tensor SumGroups(const at::Tensor& x, int64_t group) {
  if (group == 1) return x;
  return x.reshape({x.size(0), x.size(1) / group, group, x.size(2), x.size(3)}).sum(2);
}

Options ReadOptions(const Args& a, bool grad) {
  Options o;
  // Forward: (q, k, v, head_num, layout, pse, padding_mask, atten_mask, scale, keep_prob, pre,
  // next, inner_precise, prefix, seq_q, seq_kv, sparse_mode, ...). Grad: (q, k, v, dy, head_num,
  // layout, pse, padding_mask, atten_mask, softmax_max, softmax_sum, softmax_in, attention_in,
  // scale_value, keep_prob, pre, next, inner_precise, seed, offset, numels, prefix, seq_q,
  // seq_kv, sparse_mode, ...).
  const std::size_t base = grad ? 1 : 0;
  o.head_num = a.i64(3 + base);
  o.layout = a.str(4 + base);
  o.pse = a.optional_tensor(5 + base);
  o.atten_mask = a.optional_tensor(7 + base);
  const std::size_t after_mask = grad ? 13 : 8;
  o.scale = a.f64(after_mask);
  o.keep_prob = a.f64(after_mask + 1);
  o.pre_tokens = a.i64(after_mask + 2);
  o.next_tokens = a.i64(after_mask + 3);
  const std::size_t seq = grad ? 22 : 14;
  o.seq_q = a.optional_ints(seq);
  o.seq_kv = a.optional_ints(seq + 1);
  o.sparse_mode = a.i64(seq + 2);
  Validate(o, a.op_name());
  return o;
}

// The (start, length) of each sequence in a cumulative length list.
std::vector<std::pair<int64_t, int64_t>> Segments(const std::vector<int64_t>& cumulative) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t start = 0;
  for (int64_t end : cumulative) {
    TORCH_CHECK(end >= start, "npu_fusion_attention: actual_seq lengths must be cumulative");
    out.emplace_back(start, end - start);
    start = end;
  }
  return out;
}

// The call's problems: one for the fixed layouts, one per sequence for TND. `rows` slices the
// per-sequence rows back out of a TND tensor.
struct Problem {
  Block block;
  int64_t q_start = 0, q_len = 0, kv_start = 0, kv_len = 0;
};

std::vector<Problem> Problems(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const Options& o, at::ScalarType ct) {
  std::vector<Problem> out;
  auto make = [&](const at::Tensor& qq, const at::Tensor& kk, const at::Tensor& vv) {
    Block b;
    const int64_t kv_heads = KvHeads(q, k, o);
    b.q = ToBNSD(qq.to(ct), o.layout, o.head_num);
    at::Tensor kb = ToBNSD(kk.to(ct), o.layout, kv_heads);
    at::Tensor vb = ToBNSD(vv.to(ct), o.layout, kv_heads);
    const int64_t n = b.q.size(1), nkv = kb.size(1);
    TORCH_CHECK(nkv > 0 && n % nkv == 0, "npu_fusion_attention: ", n,
                " query heads do not group over ", nkv, " key/value heads");
    b.group = n / nkv;
    b.k = b.group == 1 ? kb : kb.repeat_interleave(b.group, 1);
    b.v = b.group == 1 ? vb : vb.repeat_interleave(b.group, 1);
    return b;
  };
  if (o.layout != "TND") {
    Problem p;
    p.block = make(q, k, v);
    const int64_t s1 = p.block.q.size(2), s2 = p.block.k.size(2);
    std::optional<at::Tensor> given = o.atten_mask;
    p.block.mask = BlockMask(o, given, s1, s2, p.block.q.options());
    if (o.pse) p.block.pse = o.pse->to(ct);
    out.push_back(std::move(p));
    return out;
  }
  const auto qs = Segments(*o.seq_q), kvs = Segments(*o.seq_kv);
  TORCH_CHECK(qs.size() == kvs.size(), "npu_fusion_attention: ", qs.size(), " query sequences but ",
              kvs.size(), " key/value sequences");
  for (std::size_t i = 0; i < qs.size(); ++i) {
    Problem p;
    p.q_start = qs[i].first;
    p.q_len = qs[i].second;
    p.kv_start = kvs[i].first;
    p.kv_len = kvs[i].second;
    p.block = make(q.narrow(0, p.q_start, p.q_len), k.narrow(0, p.kv_start, p.kv_len),
                   v.narrow(0, p.kv_start, p.kv_len));
    std::optional<at::Tensor> given;
    if (o.atten_mask) {
      given = o.atten_mask->narrow(-2, 0, std::min(p.q_len, o.atten_mask->size(-2)))
                  .narrow(-1, 0, std::min(p.kv_len, o.atten_mask->size(-1)));
    }
    p.block.mask = BlockMask(o, given, p.q_len, p.kv_len, p.block.q.options());
    out.push_back(std::move(p));
  }
  return out;
}

at::Tensor Stats(const at::Tensor& row, const std::string& layout) {
  // (B, N, S1, 1) -> (B, N, S1, 8); TND: (1, N, T, 1) -> (T, N, 8).
  at::Tensor s = row.expand({row.size(0), row.size(1), row.size(2), kStatsWidth});
  if (layout == "TND") s = s.squeeze(0).permute({1, 0, 2});
  return s.to(StatsType(row)).contiguous();
}

}  // namespace

Stack FusionAttention(const Args& a) {
  const at::Tensor& q = a.tensor(0);
  const at::Tensor& k = a.tensor(1);
  const at::Tensor& v = a.tensor(2);
  const Options o = ReadOptions(a, /*grad=*/false);
  const at::ScalarType ct = ComputeType(q);
  std::vector<at::Tensor> outs, maxes, sums;
  for (const Problem& p : Problems(q, k, v, o, ct)) {
    const Softmax sm = Probabilities(p.block, o.scale);
    outs.push_back(FromBNSD(at::matmul(sm.p, p.block.v), o.layout));
    maxes.push_back(Stats(sm.max, o.layout));
    sums.push_back(Stats(sm.sum, o.layout));
  }
  Stack r = Results({at::cat(outs, 0).to(q.scalar_type()), at::cat(maxes, 0), at::cat(sums, 0),
                     at::empty({0}, q.options())});
  // seed, offset, numels: the dropout generator's bookkeeping (no dropout here).
  for (int i = 0; i < 3; ++i) r.emplace_back(int64_t{0});
  return r;
}

// dV = P^T dY; dP = dY V^T; dZ = P * (dP - D); dQ = scale dZ K, dK = scale dZ^T Q, dpse = scale dZ;
// K and V gradients summed over each query group. P from the forward's softmax_max/softmax_sum
// and D = rowsum(dY * O) from its output attention_in, as the kernel computes them (both
// rebuilt from Q, K, V only when the call carries none: D is then rowsum(dP * P), equal for a
// correct forward).
Stack FusionAttentionGrad(const Args& a) {
  const at::Tensor& q = a.tensor(0);
  const at::Tensor& k = a.tensor(1);
  const at::Tensor& v = a.tensor(2);
  const at::Tensor& dy = a.tensor(3);
  const Options o = ReadOptions(a, /*grad=*/true);
  const at::ScalarType ct = ComputeType(q);
  // The forward's statistics and output, as the grad's schema passes them (softmax_in unused).
  const std::optional<at::Tensor> softmax_max = a.optional_tensor(9);
  const std::optional<at::Tensor> softmax_sum = a.optional_tensor(10);
  const std::optional<at::Tensor> attention_in = a.optional_tensor(12);
  std::vector<at::Tensor> dqs, dks, dvs;
  at::Tensor dpse;
  for (const Problem& p : Problems(q, k, v, o, ct)) {
    const Block& b = p.block;
    auto rows = [&](const at::Tensor& t) {  // a (B, S, ...) or TND tensor of the call -> BNSD
      return ToBNSD(o.layout == "TND" ? t.narrow(0, p.q_start, p.q_len).to(ct) : t.to(ct), o.layout,
                    o.head_num);
    };
    const at::Tensor dyb = rows(dy);
    const std::optional<at::Tensor> max = StatRows(softmax_max, o.layout, p.q_start, p.q_len, ct);
    const std::optional<at::Tensor> sum = StatRows(softmax_sum, o.layout, p.q_start, p.q_len, ct);
    const at::Tensor prob =
        max && sum ? ProbabilitiesFromStats(b, o.scale, *max, *sum) : Probabilities(b, o.scale).p;
    const at::Tensor dv = at::matmul(prob.transpose(-1, -2), dyb);
    const at::Tensor dp = at::matmul(dyb, b.v.transpose(-1, -2));
    const bool has_out = attention_in && attention_in->defined() && attention_in->numel() > 0;
    const at::Tensor correction =
        has_out ? (dyb * rows(*attention_in)).sum(-1, true) : (dp * prob).sum(-1, true);
    const at::Tensor dz = prob * (dp - correction) * o.scale;
    dqs.push_back(FromBNSD(at::matmul(dz, b.k), o.layout));
    dks.push_back(FromBNSD(SumGroups(at::matmul(dz.transpose(-1, -2), b.q), b.group), o.layout));
    dvs.push_back(FromBNSD(SumGroups(dv, b.group), o.layout));
    if (b.pse) dpse = at::sum_to(dz, b.pse->sizes());
  }
  return Results({at::cat(dqs, 0).to(q.scalar_type()), at::cat(dks, 0).to(k.scalar_type()),
                  at::cat(dvs, 0).to(v.scalar_type()),
                  dpse.defined() ? dpse.to(o.pse->scalar_type()) : at::empty({0}, q.options())});
}

}  // namespace parity::oplib::npu
