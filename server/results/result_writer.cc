#include "server/results/result_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <regex>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "server/results/append_file.h"

namespace parity::server {
namespace {

namespace fs = std::filesystem;

constexpr char kBom[] = "\xEF\xBB\xBF";

}  // namespace

// The result rows of one step of a rank, waiting for their backward calls, in the order their
// APIs first appeared.
struct ResultWriter::PendingStep {
  struct Api {
    std::string name;
    std::vector<CheckStatus> forward, backward;
    std::string message;  // the first non-pass call's
  };
  std::vector<Api> apis;
  std::unordered_map<std::string, std::size_t> by_name;
  std::unordered_map<std::string, uint32_t> backward_outputs;  // rows numbered so far, by API
};

// The five open files of one rank, and its result rows still waiting.
struct ResultWriter::RankFiles {
  std::map<int64_t, PendingStep> pending;  // by step
  std::string timestamp;
  bool resumed = false;
  AppendFile accuracy_result;
  AppendFile accuracy_details;
  AppendFile precision_result;
  AppendFile precision_details;
  AppendFile jsonl;
  std::vector<std::string> paths;
  // Each file with the header a new one of it starts with (none for the JSON lines).
  std::vector<std::pair<AppendFile*, const std::vector<std::string>*>> Files() {
    return {{&accuracy_result, &ResultHeader(false)},
            {&accuracy_details, &AccuracyDetailsHeader()},
            {&precision_result, &ResultHeader(true)},
            {&precision_details, &PrecisionDetailsHeader()},
            {&jsonl, nullptr}};
  }
};

namespace {

// Opens `file` at `path`, starting a new file with `header` (a CSV's BOM and header row).
absl::Status OpenWithHeader(AppendFile* file, const std::string& path,
                            const std::vector<std::string>* header) {
  PARITY_ASSIGN_OR_RETURN(const bool had_lines, file->Open(path));
  if (!had_lines && header != nullptr) {
    PARITY_RETURN_IF_ERROR(file->Append(absl::StrCat(kBom, CsvRow(*header)), /*row=*/false));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ResultWriter::ReopenVanished(int32_t rank, RankFiles* f) {
  uint64_t lost = 0;
  std::vector<std::string> vanished;
  for (auto [file, header] : f->Files()) {
    if (file->StillThere()) continue;
    // The details and JSON lines hold a row per call; the result files a row per API and step.
    lost = std::max(lost, file->rows());
    vanished.push_back(file->path());
    const std::string path = file->path();
    file->Close();
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);  // the folder may be gone too
    PARITY_RETURN_IF_ERROR(OpenWithHeader(file, path, header));
  }
  if (vanished.empty()) return absl::OkStatus();
  if (on_vanished_) on_vanished_(lost);
  common::LogError(absl::StrCat(
      "result files of rank ", rank, " were deleted or replaced while the server wrote them: ",
      absl::StrJoin(vanished, ", "), "; reopened (new files from here on); the rows of ", lost,
      " calls written to the files that vanished are lost (counted in "
      "parity_server_result_rows_lost_total{reason=\"vanished\"})"));
  return absl::OkStatus();
}

ResultWriter::ResultWriter(std::string dir, const StandardsTable& standards, std::string timestamp)
    : dir_(std::move(dir)), standards_(standards), timestamp_(std::move(timestamp)) {}

ResultWriter::~ResultWriter() {
  absl::MutexLock lock(&mu_);
  for (auto& [rank, files] : ranks_) {
    if (absl::Status s = WriteResultsBefore(files.get(), INT64_MAX); !s.ok()) {
      common::LogError(absl::StrCat("result files of rank ", rank, ": ", s.ToString()));
    }
  }
}

absl::Status ResultWriter::WriteResultsBefore(RankFiles* f, int64_t step) {
  absl::Status status;
  while (!f->pending.empty() && f->pending.begin()->first < step) {
    std::string rows;
    for (const PendingStep::Api& api : f->pending.begin()->second.apis) {
      rows += ResultRow(api.name, api.forward, api.backward, api.message);
    }
    f->pending.erase(f->pending.begin());
    // One write per file and step; a failure loses that step's rows (counted by the caller).
    if (absl::Status s = AppendResultRows(f, rows); !s.ok() && status.ok()) status = s;
  }
  return status;
}

absl::Status ResultWriter::AppendResultRows(RankFiles* f, const std::string& rows) {
  absl::Status status;
  for (AppendFile* file : {&f->accuracy_result, &f->precision_result}) {
    if (absl::Status s = file->Append(rows); !s.ok() && status.ok()) status = s;
  }
  return status;
}

absl::Status ResultWriter::WriteOldestRows(RankFiles* f, PendingStep* step) {
  const std::size_t n = step->apis.size() - kMaxPendingResultRows / 2;
  std::string rows;
  for (std::size_t i = 0; i < n; ++i) {
    const PendingStep::Api& api = step->apis[i];
    rows += ResultRow(api.name, api.forward, api.backward, api.message);
    step->by_name.erase(api.name);
    step->backward_outputs.erase(api.name);
  }
  step->apis.erase(step->apis.begin(), step->apis.begin() + static_cast<std::ptrdiff_t>(n));
  for (auto& [name, index] : step->by_name) index -= n;
  return AppendResultRows(f, rows);
}

absl::Status ResultWriter::EndOfStream(int32_t rank) {
  absl::MutexLock lock(&mu_);
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return absl::OkStatus();
  absl::Status s = WriteResultsBefore(it->second.get(), INT64_MAX);
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("writing results for rank ", rank, ": ", s.message()));
  }
  return s;
}

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
                  const std::vector<std::string>* header, AppendFile* out) -> absl::Status {
    const std::string path =
        (fs::path(dir_) / absl::StrCat(stem, "_", files->timestamp, "_rank", rank, ext)).string();
    PARITY_RETURN_IF_ERROR(OpenWithHeader(out, path, header));
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

absl::Status ResultWriter::Write(const CallOrigin& origin, const ServerCall& call,
                                 const CallOutcome& check) {
  const bool backward = call.id.backward();
  const std::string& api = call.names.csv_api;
  // A backward call's output rows are numbered on from its API's earlier backward calls.
  uint32_t first_backward_output = 0;
  if (backward) {
    absl::MutexLock lock(&mu_);
    PARITY_ASSIGN_OR_RETURN(RankFiles * f, FilesFor(origin.rank));
    uint32_t& n = f->pending[call.id.step].backward_outputs[api];
    first_backward_output = n;
    n += static_cast<uint32_t>(check.outputs.size());
  }
  // Every line is made outside the lock: the lock covers only the writes.
  const CallRows rows = RowsOf(origin, call, check, standards_, first_backward_output);
  absl::MutexLock lock(&mu_);
  PARITY_ASSIGN_OR_RETURN(RankFiles * f, FilesFor(origin.rank));
  auto failed = [&origin](const absl::Status& s) {
    return absl::Status(s.code(),
                        absl::StrCat("writing results for rank ", origin.rank, ": ", s.message()));
  };
  if (absl::Status s = ReopenVanished(origin.rank, f); !s.ok()) return failed(s);
  for (auto [file, row] : {std::pair{&f->accuracy_details, &rows.accuracy_details},
                           std::pair{&f->precision_details, &rows.precision_details},
                           std::pair{&f->jsonl, &rows.json}}) {
    if (absl::Status s = file->Append(*row); !s.ok()) return failed(s);
  }
  // Its part of its API's result row, and the rows of the steps before the previous one.
  PendingStep& step = f->pending[call.id.step];
  auto [it, added] = step.by_name.emplace(rows.api, step.apis.size());
  if (added) step.apis.push_back({rows.api, {}, {}, ""});
  PendingStep::Api& row = step.apis[it->second];
  (rows.backward ? row.backward : row.forward).push_back(rows.status);
  if (row.message.empty()) row.message = rows.message;
  if (absl::Status s = WriteResultsBefore(f, call.id.step - 1); !s.ok()) return failed(s);
  // A step that never ends (no step() in the training, an inference run) keeps no more than
  // this: the oldest rows go out as they stand.
  if (step.apis.size() > kMaxPendingResultRows) {
    if (absl::Status s = WriteOldestRows(f, &step); !s.ok()) return failed(s);
  }
  return absl::OkStatus();
}

std::size_t ResultWriter::PendingRowsForTesting(int32_t rank) const {
  absl::MutexLock lock(&mu_);
  auto it = ranks_.find(rank);
  std::size_t n = 0;
  if (it != ranks_.end()) {
    for (const auto& [step, pending] : it->second->pending) n += pending.apis.size();
  }
  return n;
}

std::vector<std::string> ResultWriter::Paths() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [rank, f] : ranks_) out.insert(out.end(), f->paths.begin(), f->paths.end());
  return out;
}

}  // namespace parity::server
