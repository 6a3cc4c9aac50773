#include "server/call/verdict_encoder.h"

#include "parity/v1/parity.pb.h"

#include "absl/strings/str_cat.h"

namespace parity::server {
v1::VerdictStatus ToProto(CheckStatus status) {
  switch (status) {
    case CheckStatus::kUnspecified:
      return v1::VERDICT_STATUS_UNSPECIFIED;
    case CheckStatus::kPass:
      return v1::VERDICT_STATUS_PASS;
    case CheckStatus::kWarning:
      return v1::VERDICT_STATUS_WARNING;
    case CheckStatus::kError:
      return v1::VERDICT_STATUS_ERROR;
    case CheckStatus::kSkip:
      return v1::VERDICT_STATUS_SKIP;
    case CheckStatus::kRejected:
      return v1::VERDICT_STATUS_REJECTED;
  }
  return v1::VERDICT_STATUS_UNSPECIFIED;
}

CheckStatus FromProto(v1::VerdictStatus status) {
  for (CheckStatus s : {CheckStatus::kPass, CheckStatus::kWarning, CheckStatus::kError,
                        CheckStatus::kSkip, CheckStatus::kRejected}) {
    if (ToProto(s) == status) return s;
  }
  return CheckStatus::kUnspecified;
}

void FillOutputVerdict(const OutputOutcome& out, v1::OutputVerdict* ov) {
  const OutputJudgement& j = out.judgement;
  ov->set_index(out.index);
  ov->set_status(ToProto(j.status));
  ov->set_standard(std::string(StandardName(j.standard)));
  ov->set_dtype(static_cast<v1::DType>(out.dtype));
  for (int64_t d : out.shape) ov->add_shape(d);
  ov->set_failed_metric(std::string(MetricName(j.failed_metric)));
  ov->set_message(j.message);
  auto& map = *ov->mutable_metrics();
  for (auto& [name, v] : OutputMetricValues(j)) map[std::move(name)] = v;
}

v1::Verdict DecidedVerdict(const ServerCall& call, CheckStatus status, std::string message,
                           absl::StatusCode code) {
  v1::Verdict v;
  v.set_sequence(call.id.sequence);
  v.set_api_name(call.names.api);
  v.set_phase(static_cast<v1::Phase>(call.id.phase));
  v.set_step(call.id.step);
  v.set_module_path(call.id.module_path);
  v.set_op_name(call.id.op_name);
  v.set_status(ToProto(status));
  v.set_message(std::move(message));
  // The contract (Verdict.error_code): a code says why a call was not checked or was refused;
  // a call with an outcome (an unknown operator that wrote its input is an error) carries 0.
  const bool coded = status == CheckStatus::kSkip || status == CheckStatus::kRejected;
  v.set_error_code(coded ? static_cast<int>(code) : 0);
  return v;
}

v1::Verdict ToVerdict(const ServerCall& call, const CallOutcome& check) {
  v1::Verdict v = DecidedVerdict(call, check.status, check.message, check.error_code);
  v.set_replay_seconds(check.replay_seconds);
  v.set_compare_seconds(check.compare_seconds);
  for (const OutputOutcome& out : check.outputs) FillOutputVerdict(out, v.add_outputs());
  for (const InputWritten& w : check.inputs_written) {
    v1::InputWritten* out = v.add_inputs_written();
    out->set_index(w.index);
    out->set_name(w.name);
    out->set_changed_elements(w.changed_elements);
    out->set_elements(w.elements);
  }
  v.set_failed_metric(std::string(CallFailedMetric(check)));
  return v;
}

}  // namespace parity::server
