// False errors on clean float16/bfloat16 GEMM and attention calls, and the ULP errors of clean
// bfloat16 GEMMs under autocast against the two goldens.
//
//   lowp_false_errors [--calls=N] [--seed=S]
//
// Each call is drawn at random (op family, dtype, shape, scale) and its "device" output is made by
// an independent correct kernel, not libtorch's: a GEMM summed in float32 over k-blocks of 16 in
// reverse order (or exactly, in float64) and rounded once; a softmax in float32 with the row sum
// taken in reverse blocks, rounded once. The server's CallChecker (CPU bench, float64 golden)
// judges it as it would a training's. Families: mm, bmm (attention's QK^T and PV shapes), addmm,
// linear under autocast (float32 inputs rounded by autocast), softmax over attention rows.
// Every error is a false error. The same calls with a planted fault (partial sums rounded to the
// dtype every 8 terms; a softmax row normalised without its largest term) give the recall.
//
// Also printed: for the autocast linears, the share of output elements within 0.5 / 1 / 2 / 8
// ULP of the golden made from the float32 inputs as captured (the old golden) and of the golden
// made from the inputs the kernel received (rounded by autocast first).
//
// Exit status 1 when a clean call is an error or fewer than 90% of the faulty ones are: ctest
// runs it small (lowp_false_errors, label torch); docs/results.md quotes --calls=11112 (10,000
// clean calls).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/torch/torch_pch.h"
#include "common/torch/value_codec.h"
#include "parity/v1/parity.pb.h"
#include "server/compare/metric.h"
#include "server/compare/standards.h"
#include "server/replay/call_checker.h"

namespace {

namespace v1 = parity::v1;
using parity::server::CallChecker;
using parity::server::CallOutcome;
using parity::server::StandardsTable;
using Stack = std::vector<c10::IValue>;

// A float32 GEMM of [.., m, k] x [.., k, n] (float operands holding low-precision values), summed
// over k in blocks of 16 taken last to first; `round_every` > 0 rounds the running sum to `low`
// every that many terms (the planted fault).
at::Tensor BlockedProduct(const at::Tensor& a, const at::Tensor& b, at::ScalarType low,
                          int64_t round_every) {
  const int64_t k = a.size(-1);
  at::Tensor acc = at::zeros({a.size(-2), b.size(-1)}, at::kFloat);
  if (a.dim() == 3) acc = at::zeros({a.size(0), a.size(1), b.size(-1)}, at::kFloat);
  const int64_t block = round_every > 0 ? round_every : 16;
  for (int64_t end = k; end > 0; end -= block) {
    const int64_t start = std::max<int64_t>(0, end - block);
    acc = acc + at::matmul(a.narrow(-1, start, end - start), b.narrow(-2, start, end - start));
    if (round_every > 0) acc = acc.to(low).to(at::kFloat);
  }
  return acc;
}

at::Tensor Exact(const at::Tensor& a, const at::Tensor& b) {
  return at::matmul(a.to(at::kDouble), b.to(at::kDouble));
}

// A softmax over the last dim in float32 with the row sum taken in blocks of 32 from the end;
// `faulty` normalises by the sum without the row's largest term (the planted fault).
at::Tensor BlockedSoftmax(const at::Tensor& x, bool faulty) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor e = at::exp(xf - std::get<0>(xf.max(-1, true)));
  const int64_t n = e.size(-1);
  at::Tensor sum = at::zeros_like(e.narrow(-1, 0, 1));
  for (int64_t end = n; end > 0; end -= 32) {
    const int64_t start = std::max<int64_t>(0, end - 32);
    sum = sum + e.narrow(-1, start, end - start).sum(-1, true);
  }
  if (faulty) sum = sum - 1 + 1.0 / static_cast<double>(n);  // the max's exp(0) = 1, nearly
  return e / sum;
}

// Share of elements of `d` within each bound of ULP of `g` (float64), as the standard counts
// ULP for float16/bfloat16: the golden's exponent, floored at the dtype's minimum.
std::vector<double> UlpShares(const at::Tensor& d, const at::Tensor& g, at::ScalarType dtype,
                              const std::vector<double>& bounds) {
  const int mantissa = dtype == at::kBFloat16 ? 7 : 10;
  const int min_e = dtype == at::kBFloat16 ? -126 : -14;
  const at::Tensor gd = g.to(at::kDouble).flatten();
  const at::Tensor e = at::clamp_min(at::floor(at::log2(gd.abs())), min_e);
  const at::Tensor ulp =
      (d.to(at::kDouble).flatten() - gd).abs() * at::pow(2.0, mantissa - e.masked_fill(gd == 0, 0));
  std::vector<double> shares;
  for (double b : bounds) shares.push_back((ulp <= b).to(at::kDouble).mean().item<double>());
  return shares;
}

// The call the agent would send for `name(args)` whose device produced `outputs` (the op is not
// run here: libtorch 1.13's CPU has no float16 GEMM).
v1::ApiCall Call(const std::string& name, const std::string& overload, const Stack& args,
                 const Stack& outputs) {
  v1::ApiCall call;
  call.set_op_name(name);
  call.set_overload(overload);
  call.set_phase(v1::PHASE_FORWARD);
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
  const auto& schema_args = op.schema().arguments();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const c10::Type* hint = i < schema_args.size() ? schema_args[i].real_type().get() : nullptr;
    if (!parity::common::EncodeValue(args[i], hint, {}, "in", call.add_inputs()).ok()) std::abort();
  }
  for (const c10::IValue& out : outputs) {
    if (!parity::common::EncodeValue(out, nullptr, {}, "out", call.add_outputs()).ok())
      std::abort();
  }
  return call;
}

struct Tally {
  int64_t calls = 0, errors = 0, faulty = 0, caught = 0;
  std::map<std::string, int64_t> why;  // failed metric of the false errors
};

}  // namespace

int main(int argc, char** argv) {
  int64_t calls = 11112;  // 10,000 clean
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--calls=", 0) == 0 && absl::SimpleAtoi(a.substr(8), &calls) && calls > 0) continue;
    if (a.rfind("--seed=", 0) == 0 && absl::SimpleAtoi(a.substr(7), &seed)) continue;
    std::fprintf(stderr, "usage: lowp_false_errors [--calls=N] [--seed=S]\n");
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  at::set_num_threads(1);  // many small calls: threads cost more than they give
  parity::server::CheckerOptions options;
  options.bench_device = "cpu";
  auto checker = CallChecker::Create(options, StandardsTable::Default());
  if (!checker.ok()) {
    std::fprintf(stderr, "%s\n", std::string(checker.status().message()).c_str());
    return 1;
  }
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const std::vector<std::string> families = {"mm",    "bmm QK^T",        "bmm PV",
                                             "addmm", "linear autocast", "softmax"};
  std::map<std::string, Tally> tally;
  const std::vector<double> bounds = {0.5 + 1e-9, 1, 2, 8};
  std::vector<double> old_golden(bounds.size()), kernel_golden(bounds.size());
  int64_t ulp_calls = 0;
  uint64_t sequence = 0;
  for (int64_t n = 0; n < calls; ++n) {
    const std::string family = families[uniform(0, families.size() - 1)];
    const at::ScalarType dtype = uniform(0, 1) ? at::kBFloat16 : at::kHalf;
    const bool faulty = n % 10 == 9;  // one call in ten carries a planted fault
    const double scale = std::pow(10.0, static_cast<double>(uniform(-1, 1)));
    at::manual_seed(static_cast<uint64_t>(n) + seed * 1000003);
    auto rand = [&](std::vector<int64_t> shape) { return (at::randn(shape) * scale).to(dtype); };
    // A planted fault must change something: sums of at least 32 terms (rounded every 8).
    const int64_t m = uniform(1, 48), k = uniform(faulty ? 32 : 8, 192), cols = uniform(1, 48);
    const int64_t round_every = faulty ? 8 : 0;
    // The device's GEMM: blocked float32, or exact, rounded once to the dtype.
    auto gemm = [&](const at::Tensor& a, const at::Tensor& b) {
      if (!faulty && n % 2 == 0) return Exact(a, b).to(dtype);
      return BlockedProduct(a.to(at::kFloat), b.to(at::kFloat), dtype, round_every).to(dtype);
    };
    v1::ApiCall call;
    std::optional<at::Tensor> ulp_device, ulp_old, ulp_kernel;
    if (family == "mm") {
      const at::Tensor a = rand({m, k}), b = rand({k, cols});
      call = Call("aten::mm", "", {a, b}, {gemm(a, b)});
    } else if (family == "bmm QK^T" || family == "bmm PV") {
      const int64_t heads = uniform(1, 8), s = uniform(faulty ? 32 : 4, 64);
      const int64_t d = 8 * uniform(faulty ? 4 : 1, 8);
      const at::Tensor a = family == "bmm QK^T" ? rand({heads, s, d}) : rand({heads, s, s});
      const at::Tensor b = family == "bmm QK^T" ? rand({heads, d, s}) : rand({heads, s, d});
      call = Call("aten::bmm", "", {a, b}, {gemm(a, b)});
    } else if (family == "addmm") {
      const at::Tensor c = rand({cols}), a = rand({m, k}), b = rand({k, cols});
      const at::Tensor y =
          !faulty && n % 2 == 0
              ? (Exact(a, b) + c.to(at::kDouble)).to(dtype)
              : (BlockedProduct(a.to(at::kFloat), b.to(at::kFloat), dtype, round_every) +
                 c.to(at::kFloat))
                    .to(dtype);
      call = Call("aten::addmm", "", {c, a, b, 1, 1}, {y});
    } else if (family == "linear autocast") {
      // Float32 activations and weights; autocast rounds them to the dtype for the kernel.
      const at::Tensor x = at::randn({m, k}) * scale, w = at::randn({cols, k}) * scale;
      const at::Tensor b = at::randn({cols}) * scale;
      const at::Tensor xr = x.to(dtype), wr = w.to(dtype), br = b.to(dtype);
      at::Tensor y;
      if (!faulty && n % 2 == 0) {
        y = (Exact(xr, wr.t()) + br.to(at::kDouble)).to(dtype);
      } else {
        y = (BlockedProduct(xr.to(at::kFloat), wr.to(at::kFloat).t(), dtype, round_every) +
             br.to(at::kFloat))
                .to(dtype);
      }
      call = Call("aten::linear", "", {x, w, b}, {y});
      call.set_autocast_dtype(dtype == at::kBFloat16 ? v1::DTYPE_BFLOAT16 : v1::DTYPE_FLOAT16);
      if (!faulty && dtype == at::kBFloat16) {
        ulp_device = y;
        ulp_old = Exact(x, w.t()) + b.to(at::kDouble);
        ulp_kernel = Exact(xr, wr.t()) + br.to(at::kDouble);
      }
    } else {  // softmax over attention rows
      const at::Tensor x = rand({uniform(1, 16), uniform(2, 256)});
      call = Call("aten::_softmax", "", {x, -1, false}, {BlockedSoftmax(x, faulty).to(dtype)});
    }
    call.set_sequence(++sequence);
    const CallOutcome check = (*checker)->Judge(call);
    Tally& t = tally[absl::StrCat(family, " ", dtype == at::kBFloat16 ? "bf16" : "fp16")];
    if (faulty) {
      ++t.faulty;
      t.caught += check.status == parity::server::CheckStatus::kError;
      continue;
    }
    ++t.calls;
    if (check.status == parity::server::CheckStatus::kError) {
      ++t.errors;
      for (const auto& o : check.outputs) {
        if (o.judgement.status == parity::server::CheckStatus::kError) {
          ++t.why[std::string(parity::server::MetricName(o.judgement.failed_metric))];
        }
      }
    } else if (check.status != parity::server::CheckStatus::kPass) {
      std::fprintf(stderr, "%s: %s: %s\n", family.c_str(),
                   std::string(parity::server::StatusText(check.status)).c_str(),
                   check.message.c_str());
    }
    if (ulp_device) {
      const auto o = UlpShares(*ulp_device, *ulp_old, dtype, bounds);
      const auto kk = UlpShares(*ulp_device, *ulp_kernel, dtype, bounds);
      for (std::size_t i = 0; i < bounds.size(); ++i) {
        old_golden[i] += o[i];
        kernel_golden[i] += kk[i];
      }
      ++ulp_calls;
    }
  }
  std::printf(
      "lowp_false_errors: %lld calls (one in ten with a planted fault), seed %llu, CPU "
      "bench, golden computed in float64\n",
      static_cast<long long>(calls), static_cast<unsigned long long>(seed));
  std::printf("%-22s %8s %8s %10s %8s %8s  %s\n", "family", "clean", "errors", "error rate",
              "faulty", "caught", "false errors by metric");
  int64_t clean = 0, errors = 0, faulty = 0, caught = 0;
  for (const auto& [name, t] : tally) {
    std::string why;
    for (const auto& [metric, count] : t.why) absl::StrAppend(&why, metric, " ", count, "; ");
    std::printf("%-22s %8lld %8lld %10.5f %8lld %8lld  %s\n", name.c_str(),
                static_cast<long long>(t.calls), static_cast<long long>(t.errors),
                t.calls ? static_cast<double>(t.errors) / static_cast<double>(t.calls) : 0.0,
                static_cast<long long>(t.faulty), static_cast<long long>(t.caught), why.c_str());
    clean += t.calls;
    errors += t.errors;
    faulty += t.faulty;
    caught += t.caught;
  }
  std::printf("%-22s %8lld %8lld %10.5f %8lld %8lld\n", "all", static_cast<long long>(clean),
              static_cast<long long>(errors),
              clean ? static_cast<double>(errors) / static_cast<double>(clean) : 0.0,
              static_cast<long long>(faulty), static_cast<long long>(caught));
  if (ulp_calls > 0) {
    std::printf(
        "\nclean bf16 linears under autocast (%lld calls): share of output elements within\n",
        static_cast<long long>(ulp_calls));
    std::printf("%-44s %8s %8s %8s %8s\n", "golden", "0.5 ULP", "1 ULP", "2 ULP", "8 ULP");
    auto row = [&](const char* name, const std::vector<double>& s) {
      std::printf("%-44s", name);
      for (double v : s) std::printf(" %8.4f", v / static_cast<double>(ulp_calls));
      std::printf("\n");
    };
    row("from the float32 inputs as captured (old)", old_golden);
    row("from the inputs the kernel received (now)", kernel_golden);
  }
  // Faults that change a value by less than a ULP here and there (a softmax row of 256 similar
  // terms loses 1/256 of its sum) can pass, and the ULP share's sign test does not condemn an
  // output of a few elements on a few of them: recall is reported, and only a fall below 90%
  // fails the run. A false error always does.
  const bool recall_ok = static_cast<double>(caught) >= 0.9 * static_cast<double>(faulty);
  return errors == 0 && recall_ok ? 0 : 1;
}
