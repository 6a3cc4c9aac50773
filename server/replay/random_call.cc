// Stages 4r and 5r of a check: random ops replayed from the training's generator state, or judged
// by the properties of their draws.
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/naming/naming.h"
#include "common/naming/random_ops.h"
#include "common/torch/dtype_map.h"
#include "common/torch/generator_state.h"
#include "common/torch/torch_pch.h"
#include "common/wire/generator_device.h"
#include "server/random/random_property.h"
#include "server/replay/stages.h"

namespace parity::server {
namespace {

// Random replays set the process's default generator: one at a time.
std::mutex& RandomReplayMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}

// The unit roundoff of a floating dtype; 0 for integers and bool (their values are exact).
double UnitRoundoff(at::ScalarType t) {
  switch (t) {
    case at::kHalf:
      return std::ldexp(1.0, -11);
    case at::kBFloat16:
      return std::ldexp(1.0, -8);
    case at::kFloat:
      return std::ldexp(1.0, -24);
    case at::kDouble:
      return std::ldexp(1.0, -53);
    default:
      return 0;
  }
}

// A call's arguments by schema name.
class Args {
 public:
  Args(const c10::FunctionSchema& schema, const Stack& inputs) : schema_(schema), inputs_(inputs) {}

  const c10::IValue* Find(const char* name) const {
    const c10::optional<int> i = schema_.argumentIndexWithName(name);
    if (!i || static_cast<std::size_t>(*i) >= inputs_.size()) return nullptr;
    const c10::IValue& v = inputs_[static_cast<std::size_t>(*i)];
    return v.isNone() ? nullptr : &v;
  }
  double Double(const char* name, double fallback) const {
    const c10::IValue* v = Find(name);
    if (v == nullptr) return fallback;
    if (v->isDouble()) return v->toDouble();
    if (v->isInt()) return static_cast<double>(v->toInt());
    if (v->isScalar()) return v->toScalar().toDouble();
    return fallback;
  }
  bool Bool(const char* name, bool fallback) const {
    const c10::IValue* v = Find(name);
    return v != nullptr && v->isBool() ? v->toBool() : fallback;
  }
  std::optional<at::Tensor> Tensor(const char* name) const {
    const c10::IValue* v = Find(name);
    if (v == nullptr || !v->isTensor() || !v->toTensor().defined()) return std::nullopt;
    return v->toTensor();
  }

 private:
  const c10::FunctionSchema& schema_;
  const Stack& inputs_;
};

// Values as a contiguous float64 CPU tensor (kept alive by the caller).
at::Tensor AsDoubles(const at::Tensor& t) {
  return t.detach().to(at::kCPU).to(at::kDouble).contiguous();
}

// A per-element parameter: a scalar argument, or a tensor argument broadcast to `like`.
struct Parameter {
  at::Tensor storage;
  PerElement view;
};
Parameter ParameterOf(const Args& args, const char* name, double fallback, const at::Tensor& like) {
  Parameter p;
  if (std::optional<at::Tensor> t = args.Tensor(name)) {
    p.storage = AsDoubles(t->expand(like.sizes()));
    p.view.values = p.storage.data_ptr<double>();
  } else {
    p.view.scalar = args.Double(name, fallback);
  }
  return p;
}

// random_'s default bounds: [0, 2^digits] for floating dtypes (every integer representable),
// [0, max] for integers.
double RandomUpperBound(at::ScalarType t) {
  switch (t) {
    case at::kHalf:
      return std::ldexp(1.0, 11);
    case at::kBFloat16:
      return std::ldexp(1.0, 8);
    case at::kFloat:
      return std::ldexp(1.0, 24);
    case at::kDouble:
      return std::ldexp(1.0, 53);
    case at::kBool:
      return 1;
    case at::kByte:
      return 255;
    case at::kChar:
      return 127;
    case at::kShort:
      return 32767;
    case at::kInt:
      return 2147483647.0;
    default:
      return 9223372036854775807.0;
  }
}

// The dropout family: the output, and native_dropout's mask when it was sent.
void JudgeDropoutCall(common::RandomFamily family, const Args& args, const Stack& outputs,
                      const Draws& draws, double alpha, std::vector<OutputJudgement>* out) {
  using F = common::RandomFamily;
  const at::Tensor& y = outputs.at(0).toTensor();
  std::optional<at::Tensor> x = args.Tensor("input");
  if (!x) x = args.Tensor("self");
  TORCH_CHECK(x.has_value(), "no input tensor");
  TORCH_CHECK(x->numel() == y.numel(), "input and output sizes differ");
  const at::Tensor xd = AsDoubles(*x);
  DropoutParams prm;
  prm.p = args.Double("p", 0.5);
  prm.train = args.Bool("train", true);
  prm.alpha = family == F::kAlphaDropout || family == F::kFeatureAlphaDropout;
  if ((family == F::kFeatureDropout || family == F::kFeatureAlphaDropout) && x->dim() >= 2) {
    prm.channel = x->numel() / std::max<int64_t>(x->size(0) * x->size(1), 1);
  }
  at::Tensor md;
  const double* mask = nullptr;
  if (family == F::kNativeDropout && outputs.size() > 1 && outputs[1].isTensor() &&
      outputs[1].toTensor().numel() == y.numel()) {
    md = AsDoubles(outputs[1].toTensor());
    mask = md.data_ptr<double>();
  }
  DropoutJudgement d = JudgeDropout(xd.data_ptr<double>(), draws, mask, prm, alpha);
  out->push_back(std::move(d.output));
  if (d.mask) out->push_back(std::move(*d.mask));
}

// uniform_, normal, log_normal_, exponential_, cauchy_: a continuous law with up to two
// parameters, each a number or a tensor broadcast to the output.
OutputJudgement JudgeContinuousCall(common::RandomFamily family, const Args& args,
                                    const at::Tensor& y, const Draws& draws, double alpha) {
  using F = common::RandomFamily;
  ContinuousParams c;
  Parameter a, b;
  switch (family) {
    case F::kUniform:
      c.kind = Continuous::kUniform;
      a = ParameterOf(args, "from", 0, y);
      b = ParameterOf(args, "to", 1, y);
      break;
    case F::kNormal:
      c.kind = Continuous::kNormal;
      a = ParameterOf(args, "mean", 0, y);
      b = ParameterOf(args, "std", 1, y);
      break;
    case F::kLogNormal:
      c.kind = Continuous::kLogNormal;
      a = ParameterOf(args, "mean", 1, y);
      b = ParameterOf(args, "std", 2, y);
      break;
    case F::kExponential:
      c.kind = Continuous::kExponential;
      a = ParameterOf(args, "lambd", 1, y);
      break;
    default:
      c.kind = Continuous::kCauchy;
      a = ParameterOf(args, "median", 0, y);
      b = ParameterOf(args, "sigma", 1, y);
      break;
  }
  c.a = a.view;
  c.b = b.view;
  return JudgeContinuous(draws, c, alpha);
}

// randint, random_: integers uniform on [low, high].
OutputJudgement JudgeRandintCall(absl::string_view bare, const Args& args, const at::Tensor& y,
                                 const Draws& draws, double alpha) {
  double low = 0, high = 0;
  if (bare == "random_") {
    low = args.Double("from", 0);
    const c10::IValue* to = args.Find("to");
    high = to != nullptr ? args.Double("to", 0) - 1 : RandomUpperBound(y.scalar_type());
  } else {
    low = args.Double("low", 0);
    high = args.Double("high", 1) - 1;
  }
  return JudgeDiscreteUniform(draws, low, high, alpha);
}

OutputJudgement JudgeMultinomialCall(const Args& args, const at::Tensor& y, const Draws& draws,
                                     double alpha) {
  std::optional<at::Tensor> w = args.Tensor("self");
  TORCH_CHECK(w.has_value() && (w->dim() == 1 || w->dim() == 2), "weights must be 1-D or 2-D");
  const at::Tensor wd = AsDoubles(*w);
  const int64_t rows = w->dim() == 2 ? w->size(0) : 1;
  const int64_t categories = w->size(-1);
  const int64_t samples = static_cast<int64_t>(args.Double("num_samples", 0));
  TORCH_CHECK(y.numel() == rows * samples, "output is not rows x num_samples");
  return JudgeMultinomial(draws, wd.data_ptr<double>(), rows, categories, samples,
                          args.Bool("replacement", false), alpha);
}

OutputJudgement JudgeRreluCall(const Args& args, const at::Tensor& y, const Draws& draws,
                               double alpha) {
  std::optional<at::Tensor> x = args.Tensor("self");
  TORCH_CHECK(x.has_value() && x->numel() == y.numel(), "input and output sizes differ");
  const at::Tensor xd = AsDoubles(*x);
  return JudgeRrelu(xd.data_ptr<double>(), draws, args.Double("lower", 1.0 / 8),
                    args.Double("upper", 1.0 / 3), args.Bool("training", false), alpha);
}

// The judgements of the call's flattened outputs, by its family.
std::vector<OutputJudgement> Judge(common::RandomFamily family, absl::string_view bare,
                                   const Args& args, const Stack& outputs, double alpha) {
  using F = common::RandomFamily;
  const at::Tensor y = outputs.at(0).toTensor();
  const at::Tensor yd = AsDoubles(y);
  const Draws draws{yd.data_ptr<double>(), yd.numel(), UnitRoundoff(y.scalar_type())};
  std::vector<OutputJudgement> out;
  switch (family) {
    case F::kDropout:
    case F::kFeatureDropout:
    case F::kAlphaDropout:
    case F::kFeatureAlphaDropout:
    case F::kNativeDropout:
      JudgeDropoutCall(family, args, outputs, draws, alpha, &out);
      break;
    case F::kBernoulli: {
      // bernoulli_(p) draws with the number p; bernoulli(probabilities) with its input's.
      const Parameter p = ParameterOf(args, args.Find("p") != nullptr ? "p" : "self", 0.5, y);
      out.push_back(JudgeBernoulli(draws, p.view, alpha));
      break;
    }
    case F::kUniform:
    case F::kNormal:
    case F::kLogNormal:
    case F::kExponential:
    case F::kCauchy:
      out.push_back(JudgeContinuousCall(family, args, y, draws, alpha));
      break;
    case F::kGeometric:
      out.push_back(JudgeGeometric(draws, args.Double("p", 0.5), alpha));
      break;
    case F::kRandint:
      out.push_back(JudgeRandintCall(bare, args, y, draws, alpha));
      break;
    case F::kRandperm:
      out.push_back(JudgeRandperm(draws, static_cast<int64_t>(args.Double("n", 0))));
      break;
    case F::kMultinomial:
      out.push_back(JudgeMultinomialCall(args, y, draws, alpha));
      break;
    case F::kPoisson:
      out.push_back(JudgePoisson(draws, ParameterOf(args, "self", 0, y).view, alpha));
      break;
    case F::kRrelu:
      out.push_back(JudgeRreluCall(args, y, draws, alpha));
      break;
    case F::kNone:
    case F::kUnchecked:
      break;
  }
  return out;
}

}  // namespace

std::optional<Replay> ReplayRandom(const ServerCall& server_call, const c10::OperatorHandle& op,
                                   const DecodedCall& decoded, const c10::Device& bench_device,
                                   std::optional<at::ScalarType> autocast, std::string* why_not) {
  const common::CallIdentity& call = server_call.id;
  if (!call.generator) {
    *why_not = call.drew_random ? "the agent could not read its generator's state"
                                : "the agent sent no generator state";
    return std::nullopt;
  }
  const common::CallIdentity::Generator& g = *call.generator;
  if (g.torch_version != common::TorchVersion()) {
    *why_not = absl::StrCat("the training's torch ", g.torch_version, " and the bench's ",
                            common::TorchVersion(), " may draw differently");
    return std::nullopt;
  }
  c10::Device device(c10::kCPU);
  const wire::GeneratorDevice kind = common::GeneratorDeviceOf(g);
  if (kind == wire::kGeneratorCuda && bench_device.is_cuda()) {
    device = bench_device;
  } else if (kind != wire::kGeneratorCpu) {
    *why_not =
        absl::StrCat("the training drew from a ", g.device_type, " generator and the bench (",
                     bench_device.str(), ") has none of that kind");
    return std::nullopt;
  }
  if (!decoded.inputs_contiguous) {
    *why_not =
        "an input was not contiguous in the training, and a kernel may draw for it in "
        "another order than for a contiguous copy";
    return std::nullopt;
  }
  absl::StatusOr<at::Generator> gen = common::DefaultGenerator(device);
  if (!gen.ok()) {
    *why_not = std::string(gen.status().message());
    return std::nullopt;
  }
  const std::lock_guard<std::mutex> lock(RandomReplayMutex());
  const std::string saved = common::GeneratorStateBytes(*gen);
  if (absl::Status s = common::WriteGeneratorState(*gen, g.state); !s.ok()) {
    *why_not = std::string(s.message());
    return std::nullopt;
  }
  Replay r = ReplayBench(op, decoded.inputs, device, autocast);
  (void)common::WriteGeneratorState(*gen, saved);
  return r;
}

void JudgeRandomProperties(const ServerCall& call, const c10::FunctionSchema& schema,
                           const DecodedCall& decoded, double false_alarm, CallOutcome* check) {
  const common::RandomFamily family = call.op->random_family;
  const Stack device = Flatten(decoded.outputs);
  std::vector<OutputJudgement> judged;
  std::string failure;
  const bool decodable = !device.empty() && device[0].isTensor() &&
                         device[0].toTensor().defined() &&
                         (decoded.output_form.empty() || decoded.output_form[0].decoded());
  if (decodable) {
    try {
      judged = Judge(family, call.op->bare(), Args(schema, decoded.inputs), device, false_alarm);
    } catch (const std::exception& e) {
      failure = ErrorText(e);
    }
  } else {
    failure = "its first output was not sent with its values";
  }
  OutputTally tally;
  for (std::size_t i = 0; i < device.size(); ++i) {
    OutputOutcome out;
    out.index = static_cast<uint32_t>(i);
    if (i < judged.size()) {
      out.judgement = std::move(judged[i]);
      out.judged = false;
    } else {
      out.judgement.status = CheckStatus::kSkip;
      out.judgement.message =
          failure.empty() ? "judged with output 0" : absl::StrCat("no property check: ", failure);
    }
    if (device[i].isTensor() && device[i].toTensor().defined()) {
      const at::Tensor& t = device[i].toTensor();
      out.dtype = common::ToWireDType(t.scalar_type()).value_or(wire::kDTypeUnspecified);
      out.shape.assign(t.sizes().begin(), t.sizes().end());
    }
    tally.Add(std::move(out), check);
  }
  check->status = Aggregate(tally.statuses());
  std::string& summary = tally.summary();
  if (!failure.empty() && summary.empty()) summary = absl::StrCat("not judged: ", failure);
  check->message = std::move(summary);
}

}  // namespace parity::server
