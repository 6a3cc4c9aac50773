#include "server/results/result_writer.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dtype.h"
#include "common/naming.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace parity::server {
namespace {

namespace fs = std::filesystem;

constexpr char kBom[] = "\xEF\xBB\xBF";
const std::string kSpace = " ";

std::string Now14() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y%m%d%H%M%S", &tm);
  return buf;
}

std::string DTypeCell(v1::DType d) {
  return d == v1::DTYPE_UNSPECIFIED ? kSpace : std::string(common::TorchName(d));
}

// A metric cell: the value when the checker computed it, else " ".
std::string Metric(const v1::OutputVerdict& ov, const std::string& name) {
  auto it = ov.metrics().find(name);
  return it == ov.metrics().end() ? kSpace : CsvDouble(it->second);
}

const Ratio* FindRatio(const CheckedOutput& out, absl::string_view name) {
  for (const auto& [n, r] : out.ratios) {
    if (n == name) return &r;
  }
  return nullptr;
}

std::string Status(v1::VerdictStatus s) {
  if (s == v1::VERDICT_STATUS_REJECTED) return "SKIP";  // not checked: malformed
  if (s == v1::VERDICT_STATUS_UNSPECIFIED) return kSpace;
  return std::string(StatusText(s));
}

absl::string_view PhaseWord(v1::Phase p) {
  return p == v1::PHASE_BACKWARD ? "backward" : "forward";
}

}  // namespace

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

std::string ShapeTuple(const google::protobuf::RepeatedField<int64_t>& shape) {
  if (shape.empty()) return "()";
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

const std::vector<std::string>& ResultWriter::ResultHeader(bool precision) {
  static const std::vector<std::string> accuracy = {"API name", "Forward Test Success",
                                                    "Backward Test Success", "Message"};
  static const std::vector<std::string> api = {"API Name", "Forward Test Success",
                                               "Backward Test Success", "Message"};
  return precision ? api : accuracy;
}

const std::vector<std::string>& ResultWriter::AccuracyDetailsHeader() {
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

const std::vector<std::string>& ResultWriter::PrecisionDetailsHeader() {
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

// The five open files of one rank.
struct ResultWriter::RankFiles {
  std::string timestamp;
  bool resumed = false;
  std::FILE* accuracy_result = nullptr;
  std::FILE* accuracy_details = nullptr;
  std::FILE* precision_result = nullptr;
  std::FILE* precision_details = nullptr;
  std::FILE* jsonl = nullptr;
  std::vector<std::string> paths;

  ~RankFiles() {
    for (std::FILE* f :
         {accuracy_result, accuracy_details, precision_result, precision_details, jsonl}) {
      if (f) std::fclose(f);
    }
  }
};

ResultWriter::ResultWriter(std::string dir, const StandardsTable& standards, std::string timestamp)
    : dir_(std::move(dir)), standards_(standards), timestamp_(std::move(timestamp)) {}

ResultWriter::~ResultWriter() = default;

absl::StatusOr<std::unique_ptr<ResultWriter>> ResultWriter::Create(const std::string& output_dir,
                                                                   const StandardsTable& standards,
                                                                   std::string timestamp) {
  std::error_code ec;
  fs::create_directories(output_dir, ec);
  if (ec || !fs::is_directory(output_dir)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "output directory ", output_dir, ": cannot create (", ec ? ec.message() : "exists", ")"));
  }
  // A probe write, so that an unwritable directory fails at start-up and not at the first call.
  const std::string probe = (fs::path(output_dir) / ".parity_write_probe").string();
  std::FILE* f = std::fopen(probe.c_str(), "w");
  if (f == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat("output directory ", output_dir,
                                                    ": not writable (", std::strerror(errno), ")"));
  }
  std::fclose(f);
  fs::remove(probe, ec);
  if (timestamp.empty()) timestamp = Now14();
  return std::unique_ptr<ResultWriter>(
      new ResultWriter(output_dir, standards, std::move(timestamp)));
}

absl::StatusOr<ResultWriter::RankFiles*> ResultWriter::FilesFor(int32_t rank) {
  auto it = ranks_.find(rank);
  if (it != ranks_.end()) return it->second.get();
  auto files = std::make_unique<RankFiles>();
  // Resume: the newest existing file set of this rank, if any.
  const std::regex pattern(absl::StrCat("accuracy_checking_result_(\\d{14})_rank", rank, "\\.csv"));
  files->timestamp = timestamp_;
  std::string newest;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, m, pattern) && m[1].str() > newest) newest = m[1].str();
  }
  if (!newest.empty()) {
    files->timestamp = newest;
    files->resumed = true;
  }
  auto open = [&](const std::string& stem, const std::string& ext,
                  const std::vector<std::string>* header, std::FILE** out) -> absl::Status {
    const std::string path =
        (fs::path(dir_) / absl::StrCat(stem, "_", files->timestamp, "_rank", rank, ext)).string();
    const bool existed = fs::exists(path, ec);
    std::FILE* fp = std::fopen(path.c_str(), "a");
    if (fp == nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, ": cannot open for append (", std::strerror(errno), ")"));
    }
    ::chmod(path.c_str(), 0640);
    if (!existed && header != nullptr) {
      std::fputs(kBom, fp);
      std::fputs(CsvRow(*header).c_str(), fp);
      std::fflush(fp);
    }
    *out = fp;
    files->paths.push_back(path);
    return absl::OkStatus();
  };
  PARITY_RETURN_IF_ERROR(
      open("accuracy_checking_result", ".csv", &ResultHeader(false), &files->accuracy_result));
  PARITY_RETURN_IF_ERROR(open("accuracy_checking_details", ".csv", &AccuracyDetailsHeader(),
                              &files->accuracy_details));
  PARITY_RETURN_IF_ERROR(
      open("api_precision_compare_result", ".csv", &ResultHeader(true), &files->precision_result));
  PARITY_RETURN_IF_ERROR(open("api_precision_compare_details", ".csv", &PrecisionDetailsHeader(),
                              &files->precision_details));
  PARITY_RETURN_IF_ERROR(open("parity_results", ".jsonl", nullptr, &files->jsonl));
  RankFiles* raw = files.get();
  ranks_.emplace(rank, std::move(files));
  return raw;
}

namespace {

std::vector<std::string> AccuracyDetailsRow(const std::string& name, const CheckedOutput& out) {
  const v1::OutputVerdict& ov = out.verdict;
  std::vector<std::string> row = {
      name, DTypeCell(out.bench_dtype), DTypeCell(ov.dtype()),
      ov.dtype() == v1::DTYPE_UNSPECIFIED ? kSpace : ShapeTuple(ov.shape())};
  for (const char* m :
       {"cosine", "max_abs_error", "hundredth_ratio", "thousandth_ratio", "ten_thousandth_ratio",
        "mismatch_rate", "error_balance", "rmse", "small_value_error_ratio", "max_rel_error",
        "mean_rel_error", "inf_nan_error_rate", "rel_error_rate", "abs_error_rate", "ulp_max",
        "ulp_mean", "ulp_over_threshold_ratio"}) {
    row.push_back(Metric(ov, m));
  }
  const bool judged = out.has_device_metrics;
  row.push_back(Status(judged ? out.two_way_status : ov.status()));
  row.push_back(out.two_way_message.empty() ? kSpace : out.two_way_message);
  return row;
}

std::vector<std::string> PrecisionDetailsRow(const std::string& name, const CheckedOutput& out,
                                             absl::string_view display_standard) {
  const v1::OutputVerdict& ov = out.verdict;
  const std::string& std_name = ov.standard();
  std::vector<std::string> row = {name};
  auto judged = [&](const Ratio* r, bool decides) -> std::string {
    if (r == nullptr) return kSpace;
    if (r->pass) return "pass";
    return decides ? "error" : "Warning";
  };
  auto ratio_pair = [&](const char* metric, bool decides) {
    const Ratio* r = std_name == "benchmark" ? FindRatio(out, metric) : nullptr;
    row.push_back(r ? CsvDouble(r->value) : kSpace);
    row.push_back(judged(r, decides));
  };
  ratio_pair("small_value_error_ratio", true);
  ratio_pair("rmse", true);
  ratio_pair("max_rel_error", true);
  ratio_pair("mean_rel_error", true);
  ratio_pair("error_balance", false);
  // Absolute-threshold columns: each rate must be 0.
  const bool absolute = std_name == "absolute_threshold";
  for (const char* m : {"inf_nan_error_rate", "rel_error_rate", "abs_error_rate"}) {
    row.push_back(absolute ? Metric(ov, m) : kSpace);
    auto it = ov.metrics().find(m);
    row.push_back(!absolute || it == ov.metrics().end() ? kSpace
                  : it->second == 0                     ? "pass"
                                                        : "error");
  }
  const bool binary = std_name == "binary" || std_name == "exact";
  row.push_back(binary ? Metric(ov, "mismatch_rate") : kSpace);
  row.push_back(binary ? Status(ov.status()) : kSpace);
  const bool ulp = std_name == "ulp";
  row.push_back(ulp ? Metric(ov, "ulp_mean") : kSpace);
  row.push_back(ulp ? Metric(ov, "ulp_over_threshold_ratio") : kSpace);
  const Ratio* share = ulp ? FindRatio(out, "ulp_share") : nullptr;
  row.push_back(share ? CsvDouble(share->value) : kSpace);
  row.push_back(ulp ? Status(ov.status()) : kSpace);
  const bool thousandth = std_name == "thousandth";
  row.push_back(thousandth ? Metric(ov, "thousandth_ratio") : kSpace);
  row.push_back(thousandth ? Status(ov.status()) : kSpace);
  row.push_back(Status(ov.status()));
  row.push_back(display_standard.empty() ? kSpace : std::string(display_standard));
  row.push_back(ov.message().empty() ? kSpace : ov.message());
  return row;
}

absl::string_view DisplayStandard(const std::string& name) {
  for (Standard s :
       {Standard::kBenchmark, Standard::kAbsoluteThreshold, Standard::kBinary, Standard::kUlp,
        Standard::kThousandth, Standard::kTwoWay, Standard::kStatistics}) {
    if (name == StandardName(s)) return StandardDisplayName(s);
  }
  return name;
}

nlohmann::json Finite(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(CsvDouble(v));
}

}  // namespace

absl::Status ResultWriter::Write(const CallOrigin& origin, const v1::ApiCall& call,
                                 const CheckResult& result) {
  const v1::Verdict& v = result.verdict;
  const std::string base = common::ApiName(call);
  const absl::string_view phase = PhaseWord(call.phase());
  const bool backward = call.phase() == v1::PHASE_BACKWARD;

  // Build every line before taking the lock: the lock covers only the writes.
  std::vector<v1::VerdictStatus> two_way;
  std::string acc_details, prec_details;
  for (const CheckedOutput& out : result.outputs) {
    const std::string name = common::OutputName(call, out.verdict.index());
    acc_details += CsvRow(AccuracyDetailsRow(name, out));
    prec_details += CsvRow(PrecisionDetailsRow(name, out, DisplayStandard(out.verdict.standard())));
    two_way.push_back(out.has_device_metrics ? out.two_way_status : out.verdict.status());
  }
  auto result_row = [&](v1::VerdictStatus s) {
    const std::string status = Status(s);
    const bool explain = s != v1::VERDICT_STATUS_PASS;
    return CsvRow({base, backward ? kSpace : status, backward ? status : kSpace,
                   explain && !v.message().empty() ? v.message() : kSpace});
  };
  const v1::VerdictStatus two_way_status = result.outputs.empty() ? v.status() : Aggregate(two_way);
  const std::string acc_result = result_row(two_way_status);
  const std::string prec_result = result_row(v.status());

  nlohmann::json j;
  j["time"] = Now14();
  j["rank"] = origin.rank;
  j["run_id"] = origin.run_id;
  j["host"] = origin.hostname;
  j["sequence"] = call.sequence();
  j["step"] = call.step();
  j["api"] = base;
  j["op"] = call.op_name();
  j["overload"] = call.overload();
  j["call_index"] = call.call_index();
  j["phase"] = std::string(phase);
  if (!call.forward_op_name().empty()) {
    j["forward_op"] = call.forward_op_name();
    j["forward_api"] = common::ForwardApiName(call);
    j["backward_index"] = call.backward_index();
  }
  if (!call.autograd_node().empty()) j["autograd_node"] = call.autograd_node();
  j["module_path"] = call.module_path();
  j["in_optimizer"] = call.in_optimizer();
  j["status"] = Status(v.status());
  if (v.status() == v1::VERDICT_STATUS_REJECTED) j["rejected"] = true;
  j["message"] = v.message();
  j["replay_seconds"] = v.replay_seconds();
  j["compare_seconds"] = v.compare_seconds();
  nlohmann::json outputs = nlohmann::json::array();
  for (const CheckedOutput& out : result.outputs) {
    const v1::OutputVerdict& ov = out.verdict;
    nlohmann::json o;
    o["index"] = ov.index();
    o["status"] = Status(ov.status());
    o["standard"] = ov.standard();
    o["dtype"] = DTypeCell(ov.dtype());
    o["bench_dtype"] = DTypeCell(out.bench_dtype);
    o["shape"] = std::vector<int64_t>(ov.shape().begin(), ov.shape().end());
    o["failed_metric"] = ov.failed_metric();
    o["message"] = ov.message();
    o["two_way_status"] = Status(out.two_way_status);
    nlohmann::json metrics = nlohmann::json::object();
    for (const auto& [k, val] : ov.metrics()) metrics[k] = Finite(val);
    o["metrics"] = std::move(metrics);
    if (const DTypeConstants* c = standards_.Constants(ov.dtype())) {
      o["thresholds"] = {{"small_value", c->small_value},
                         {"small_value_atol_absolute", c->small_value_atol_absolute},
                         {"small_value_atol_benchmark", c->small_value_atol_benchmark},
                         {"rtol", c->rtol},
                         {"minimum_err", c->minimum_err}};
    }
    outputs.push_back(std::move(o));
  }
  j["outputs"] = std::move(outputs);
  const std::string json_line =
      j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";

  std::lock_guard<std::mutex> lock(mu_);
  PARITY_ASSIGN_OR_RETURN(RankFiles * f, FilesFor(origin.rank));
  // Details first, then the summary row: a crash in between never marks a call done without
  // its detail rows (msprobe wrote the summary first).
  std::fputs(acc_details.c_str(), f->accuracy_details);
  std::fputs(prec_details.c_str(), f->precision_details);
  std::fputs(json_line.c_str(), f->jsonl);
  std::fputs(acc_result.c_str(), f->accuracy_result);
  std::fputs(prec_result.c_str(), f->precision_result);
  for (std::FILE* fp : {f->accuracy_details, f->precision_details, f->jsonl, f->accuracy_result,
                        f->precision_result}) {
    if (std::fflush(fp) != 0) {
      return absl::DataLossError(
          absl::StrCat("writing results for rank ", origin.rank, ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ResultWriter::Paths() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [rank, f] : ranks_) out.insert(out.end(), f->paths.begin(), f->paths.end());
  return out;
}

}  // namespace parity::server
