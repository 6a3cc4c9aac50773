#include "server/results/verdict_text.h"

#include "absl/strings/str_cat.h"

namespace parity::server {
namespace {

void PutPairMetrics(const PairMetrics& m, absl::string_view prefix, v1::OutputVerdict* out) {
  auto& map = *out->mutable_metrics();
  for (Metric field : kPairFields) {
    if (std::optional<double> v = FieldValue(m, field)) {
      map[absl::StrCat(prefix, MetricName(field))] = *v;
    }
  }
}

}  // namespace

void FillOutputVerdict(const OutputCheck& out, v1::OutputVerdict* ov) {
  const OutputJudgement& j = out.judgement;
  ov->set_index(out.index);
  ov->set_status(j.status);
  ov->set_standard(std::string(StandardName(j.standard)));
  ov->set_dtype(out.dtype);
  for (int64_t d : out.shape) ov->add_shape(d);
  ov->set_failed_metric(std::string(MetricName(j.failed_metric)));
  ov->set_message(j.message);
  if (j.device) PutPairMetrics(*j.device, "", ov);
  if (j.bench) PutPairMetrics(*j.bench, "bench_", ov);
  auto& map = *ov->mutable_metrics();
  for (const auto& [metric, r] : j.ratios)
    map[absl::StrCat("ratio_", MetricName(metric))] = r.value;
  for (const auto& [name, v] : j.random) map[name] = v;
  if (j.statistics) {
    map["stats_nan_count"] = static_cast<double>(j.statistics->nan_count);
    map["stats_inf_count"] = static_cast<double>(j.statistics->inf_count);
    for (const auto& [metric, v] : j.statistics->device_error) {
      map[absl::StrCat(MetricName(metric), "_error")] = v;
    }
    for (const auto& [metric, v] : j.statistics->bench_error) {
      map[absl::StrCat("bench_", MetricName(metric), "_error")] = v;
    }
  }
}

v1::Verdict DecidedVerdict(const ServerCall& call, v1::VerdictStatus status, std::string message,
                           absl::StatusCode code) {
  v1::Verdict v;
  v.set_sequence(call.wire.sequence());
  v.set_api_name(call.names.api);
  v.set_phase(call.wire.phase());
  v.set_step(call.wire.step());
  v.set_module_path(call.wire.module_path());
  v.set_op_name(call.wire.op_name());
  v.set_status(status);
  v.set_message(std::move(message));
  v.set_error_code(static_cast<int>(code));
  return v;
}

v1::Verdict ToVerdict(const ServerCall& call, const CallCheck& check) {
  v1::Verdict v = DecidedVerdict(call, check.status, check.message, check.error_code);
  v.set_replay_seconds(check.replay_seconds);
  v.set_compare_seconds(check.compare_seconds);
  for (const OutputCheck& out : check.outputs) FillOutputVerdict(out, v.add_outputs());
  for (const v1::InputWritten& w : check.inputs_written) *v.add_inputs_written() = w;
  return v;
}

}  // namespace parity::server
