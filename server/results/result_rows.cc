#include "server/results/result_rows.h"

#include <chrono>
#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/wire/dtype.h"
#include "nlohmann/json.hpp"

namespace parity::server {
namespace {

const std::string kSpace = " ";

std::string DTypeCell(wire::DType d) {
  return d == wire::kDTypeUnspecified ? kSpace : std::string(common::TorchName(d));
}

// msprobe's status words; a rejected call reads SKIP (not checked: malformed), with its message.
std::string StatusCell(CheckStatus s) {
  if (s == CheckStatus::kRejected) return "SKIP";
  if (s == CheckStatus::kUnspecified) return kSpace;
  return std::string(StatusText(s));
}

// A field of the device-vs-reference metrics, or " " where it was not computed.
std::string FieldCell(const OutputJudgement& j, Metric field) {
  if (!j.device) return kSpace;
  const std::optional<double> v = FieldValue(*j.device, field);
  return v ? CsvDouble(*v) : kSpace;
}

std::vector<std::string> AccuracyDetailsRow(const std::string& name, const OutputOutcome& out) {
  const OutputJudgement& j = out.judgement;
  std::vector<std::string> row = {
      name, DTypeCell(out.reference_dtype), DTypeCell(out.dtype),
      out.dtype == wire::kDTypeUnspecified ? kSpace : ShapeTuple(out.shape)};
  if (!out.value_type.empty()) {
    // A Python value, as msprobe's compare writes one: its type in both dtype columns, and a
    // mismatch rate of 0 when equal (blank otherwise); api_precision_compare skips a row whose
    // dtype is blank and judges this one by binary consistency.
    row[1] = row[2] = out.value_type;
  }
  for (Metric field : kPairFields) {
    const bool equal_value =
        !out.value_type.empty() && field == Metric::kMismatchRate && j.status == CheckStatus::kPass;
    row.push_back(equal_value ? std::string("0") : FieldCell(j, field));
  }
  // The status of the op's own standard, as the verdict and api_precision_compare_* give it
  // (msprobe's legacy two-way chain flagged clean bfloat16 linears equal to the bench bit for bit:
  // hundredth ratio ~0.86 against the golden). The chain's status stays in the JSON record.
  row.push_back(StatusCell(j.status));
  row.push_back(j.message.empty() ? kSpace : j.message);
  return row;
}

std::vector<std::string> PrecisionDetailsRow(const std::string& name, const OutputOutcome& out) {
  const OutputJudgement& j = out.judgement;
  const Standard standard = j.standard;
  std::vector<std::string> row = {name};
  // Benchmark standard: each ratio and its judgement (error balance reported, never deciding).
  for (const auto& [metric, decides] : {std::pair{Metric::kSmallValueErrorRatio, true},
                                        {Metric::kRmse, true},
                                        {Metric::kMaxRelError, true},
                                        {Metric::kMeanRelError, true},
                                        {Metric::kErrorBalance, false}}) {
    const Ratio* r = standard == Standard::kBenchmark ? j.FindRatio(metric) : nullptr;
    row.push_back(r ? CsvDouble(r->value) : kSpace);
    row.push_back(r == nullptr ? kSpace : r->pass ? "pass" : decides ? "error" : "Warning");
  }
  // Absolute threshold: each rate must be 0.
  const bool absolute = standard == Standard::kAbsoluteThreshold;
  for (Metric rate : {Metric::kInfNanErrorRate, Metric::kRelErrorRate, Metric::kAbsErrorRate}) {
    const std::optional<double> v =
        absolute && j.device ? FieldValue(*j.device, rate) : std::nullopt;
    row.push_back(v ? CsvDouble(*v) : kSpace);
    row.push_back(!v ? kSpace : *v == 0 ? "pass" : "error");
  }
  const bool binary = standard == Standard::kBinary || standard == Standard::kExact;
  row.push_back(binary ? FieldCell(j, Metric::kMismatchRate) : kSpace);
  row.push_back(binary ? StatusCell(j.status) : kSpace);
  const bool ulp = standard == Standard::kUlp;
  row.push_back(ulp ? FieldCell(j, Metric::kUlpMean) : kSpace);
  row.push_back(ulp ? FieldCell(j, Metric::kUlpOverThresholdRatio) : kSpace);
  const Ratio* share = ulp ? j.FindRatio(Metric::kUlpShare) : nullptr;
  row.push_back(share ? CsvDouble(share->value) : kSpace);
  row.push_back(ulp ? StatusCell(j.status) : kSpace);
  const bool thousandth = standard == Standard::kThousandth;
  row.push_back(thousandth ? FieldCell(j, Metric::kThousandthRatio) : kSpace);
  row.push_back(thousandth ? StatusCell(j.status) : kSpace);
  row.push_back(StatusCell(j.status));
  const absl::string_view display = StandardDisplayName(standard);
  row.push_back(display.empty() ? kSpace : std::string(display));
  row.push_back(j.message.empty() ? kSpace : j.message);
  return row;
}

nlohmann::json Finite(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(CsvDouble(v));
}

// One output's part of the JSON-lines record.
nlohmann::json OutputRecord(const OutputOutcome& out, const StandardsTable& standards) {
  const OutputJudgement& j = out.judgement;
  nlohmann::json o;
  o["index"] = out.index;
  o["status"] = StatusCell(j.status);
  o["standard"] = std::string(StandardName(j.standard));
  o["dtype"] = DTypeCell(out.dtype);
  o["bench_dtype"] = DTypeCell(out.bench_dtype);
  o["reference_dtype"] = DTypeCell(out.reference_dtype);
  if (!out.value_type.empty()) o["value_type"] = out.value_type;
  o["shape"] = out.shape;
  o["failed_metric"] = std::string(MetricName(j.failed_metric));
  o["message"] = j.message;
  o["two_way_status"] = StatusCell(j.two_way_status);
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [k, val] : OutputMetricValues(j)) metrics[k] = Finite(val);
  o["metrics"] = std::move(metrics);
  if (const DTypeConstants* c = standards.Constants(out.dtype)) {
    o["thresholds"] = {{"small_value", c->small_value},
                       {"small_value_atol_absolute", c->small_value_atol_absolute},
                       {"small_value_atol_benchmark", c->small_value_atol_benchmark},
                       {"rtol", c->rtol},
                       {"minimum_err", c->minimum_err}};
  }
  return o;
}

nlohmann::json JsonRecord(const CallOrigin& origin, const ServerCall& server_call,
                          const CallOutcome& check, const StandardsTable& standards) {
  const CallIdentity& call = server_call.id;
  const CallNames& names = server_call.names;
  nlohmann::json j;
  j["time"] = Now14();
  j["rank"] = origin.rank;
  j["run_id"] = origin.run_id;
  j["host"] = origin.hostname;
  j["sequence"] = call.sequence;
  j["step"] = call.step;
  j["api"] = names.api;
  j["csv_api"] = names.csv_api;  // the CSV rows' API name
  j["op"] = call.op_name;
  j["overload"] = call.overload;
  j["call_index"] = call.call_index;
  j["phase"] = call.backward() ? "backward" : "forward";
  if (!call.forward_op_name.empty()) {
    j["forward_op"] = call.forward_op_name;
    j["forward_api"] = names.forward_api;
    j["backward_index"] = call.backward_index;
  }
  if (!call.autograd_node.empty()) j["autograd_node"] = call.autograd_node;
  // msprobe's names, for tooling that joins on them (common/naming/api_names.h).
  if (!names.msprobe.empty()) {
    j["msprobe_api"] = names.msprobe_api;
    j["msprobe_name"] = names.msprobe;
  }
  j["module_path"] = call.module_path;
  j["in_optimizer"] = call.in_optimizer;
  if (call.autocast_dtype != wire::kDTypeUnspecified) {
    j["autocast"] = std::string(common::TorchName(static_cast<wire::DType>(call.autocast_dtype)));
  }
  j["status"] = StatusCell(check.status);
  if (check.status == CheckStatus::kRejected) j["rejected"] = true;
  j["message"] = check.message;
  j["replay_seconds"] = check.replay_seconds;
  j["compare_seconds"] = check.compare_seconds;
  if (!check.inputs_written.empty()) {
    nlohmann::json written = nlohmann::json::array();
    for (const InputWritten& w : check.inputs_written) {
      written.push_back({{"index", w.index},
                         {"name", w.name},
                         {"changed_elements", w.changed_elements},
                         {"elements", w.elements},
                         {"status", StatusCell(CheckStatus::kError)},
                         {"failed_metric", std::string(MetricName(Metric::kInputWritten))}});
    }
    j["inputs_written"] = std::move(written);
  }
  if (!check.unchecked_writes.empty()) j["unchecked_writes"] = check.unchecked_writes;
  if (const absl::string_view metric = CallFailedMetric(check); !metric.empty()) {
    j["failed_metric"] = std::string(metric);
  }
  nlohmann::json outputs = nlohmann::json::array();
  for (const OutputOutcome& out : check.outputs) outputs.push_back(OutputRecord(out, standards));
  j["outputs"] = std::move(outputs);
  return j;
}

}  // namespace

std::string Now14() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y%m%d%H%M%S", &tm);
  return buf;
}

std::string CsvDouble(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.14f", v);
  return buf;
}

std::string CsvRow(const std::vector<std::string>& cells) {
  std::string row;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) row.push_back(',');
    const std::string& c = cells[i];
    if (c.find_first_of(",\"\r\n") == std::string::npos) {
      row += c;
      continue;
    }
    row.push_back('"');
    for (char ch : c) {
      if (ch == '"') row.push_back('"');
      row.push_back(ch);
    }
    row.push_back('"');
  }
  row += "\r\n";  // Python's csv.writer line terminator
  return row;
}

std::string ShapeTuple(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "()";
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

const std::vector<std::string>& ResultHeader(bool precision) {
  static const std::vector<std::string> accuracy = {"API name", "Forward Test Success",
                                                    "Backward Test Success", "Message"};
  static const std::vector<std::string> api = {"API Name", "Forward Test Success",
                                               "Backward Test Success", "Message"};
  return precision ? api : accuracy;
}

const std::vector<std::string>& AccuracyDetailsHeader() {
  static const std::vector<std::string> header = {"API Name",
                                                  "Bench Dtype",
                                                  "DEVICE Dtype",
                                                  "Shape",
                                                  "余弦相似度",
                                                  "最大绝对误差",
                                                  "双百指标",
                                                  "双千指标",
                                                  "双万指标",
                                                  "二进制一致错误率",
                                                  "误差均衡性",
                                                  "均方根误差",
                                                  "小值域错误占比",
                                                  "相对误差最大值",
                                                  "相对误差平均值",
                                                  "inf/nan错误率",
                                                  "相对误差错误率",
                                                  "绝对误差错误率",
                                                  "ULP误差最大值",
                                                  "ULP误差平均值",
                                                  "ULP误差大于阈值占比",
                                                  "Status",
                                                  "Message"};
  return header;
}

const std::vector<std::string>& PrecisionDetailsHeader() {
  static const std::vector<std::string> header = {"API Name",
                                                  "小值域错误比值",
                                                  "小值域判定结果",
                                                  "均方根误差比值",
                                                  "均方根误差判定结果",
                                                  "相对误差最大值比值",
                                                  "相对误差最大值判定结果",
                                                  "相对误差平均值比值",
                                                  "相对误差平均值判定结果",
                                                  "误差均衡性比值",
                                                  "误差均衡性判定结果",
                                                  "inf/nan错误率",
                                                  "inf/nan判定结果",
                                                  "相对误差错误率",
                                                  "相对误差判定结果",
                                                  "绝对误差错误率",
                                                  "绝对误差判定结果",
                                                  "二进制一致错误率",
                                                  "二进制一致错误率判定结果",
                                                  "ULP误差平均值",
                                                  "ULP误差大于阈值占比",
                                                  "ULP误差大于阈值占比比值",
                                                  "ULP误差判定结果",
                                                  "双千指标",
                                                  "双千指标判定结果",
                                                  "比对结果",
                                                  "比对算法",
                                                  "Message"};
  return header;
}

CallRows RowsOf(const CallOrigin& origin, const ServerCall& call, const CallOutcome& check,
                const StandardsTable& standards, uint32_t first_backward_output) {
  CallRows rows;
  rows.api = call.names.csv_api;
  rows.backward = call.id.backward();
  uint32_t n = first_backward_output;
  for (const OutputOutcome& out : check.outputs) {
    const std::string name = rows.backward ? absl::StrCat(rows.api, ".backward.output.", n++)
                                           : absl::StrCat(rows.api, ".forward.output.", out.index);
    rows.accuracy_details += CsvRow(AccuracyDetailsRow(name, out));
    rows.precision_details += CsvRow(PrecisionDetailsRow(name, out));
  }
  // A read-only argument the call changed: a row of its own, error, named as the input it is.
  for (const InputWritten& w : check.inputs_written) {
    OutputOutcome in;
    in.index = w.index;
    in.judgement.status = CheckStatus::kError;
    in.judgement.two_way_status = CheckStatus::kError;
    in.judgement.failed_metric = Metric::kInputWritten;
    // msprobe's details have no failed-metric column: the Message names it.
    in.judgement.message = absl::StrCat(MetricName(Metric::kInputWritten), ": ", w.name,
                                        " changed during the call: ", w.changed_elements, " of ",
                                        w.elements, " elements");
    const std::string name =
        absl::StrCat(rows.api, rows.backward ? ".backward" : ".forward", ".input.", w.index);
    rows.accuracy_details += CsvRow(AccuracyDetailsRow(name, in));
    rows.precision_details += CsvRow(PrecisionDetailsRow(name, in));
  }
  rows.status = check.status;
  if (check.status != CheckStatus::kPass) rows.message = check.message;
  rows.json = JsonRecord(origin, call, check, standards)
                  .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
              "\n";
  return rows;
}

// A direction's status over its calls: msprobe's get_api_checker_result (any error "error", else
// any Warning "Warning", else "pass"; all SKIP "SKIP"), but a direction with any call that was not
// checked (SKIP or rejected) and no error or Warning reads SKIP, never pass: msprobe's rule read
// pass for an API whose backward ran an unknown operator beside checked ones (issue 50).
std::string DirectionCell(const std::vector<CheckStatus>& statuses) {
  if (statuses.empty()) return kSpace;
  bool unchecked = false, warning = false;
  for (CheckStatus s : statuses) {
    if (s == CheckStatus::kError) return "error";
    warning |= s == CheckStatus::kWarning;
    unchecked |= s == CheckStatus::kSkip || s == CheckStatus::kRejected;
  }
  if (warning) return "Warning";
  return unchecked ? "SKIP" : "pass";
}

std::string ResultRow(const std::string& api, const std::vector<CheckStatus>& forward,
                      const std::vector<CheckStatus>& backward, const std::string& message) {
  return CsvRow(
      {api, DirectionCell(forward), DirectionCell(backward), message.empty() ? kSpace : message});
}

}  // namespace parity::server
