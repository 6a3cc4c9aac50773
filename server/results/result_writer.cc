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
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"

namespace parity::server {
namespace {

namespace fs = std::filesystem;

constexpr char kBom[] = "\xEF\xBB\xBF";

}  // namespace

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

absl::Status ResultWriter::Write(const CallOrigin& origin, const v1::ApiCall& call,
                                 const CallCheck& check, const v1::Verdict& verdict) {
  // Every line is made before taking the lock: the lock covers only the writes.
  const CallRows rows = RowsOf(origin, call, check, verdict, standards_);
  absl::MutexLock lock(&mu_);
  PARITY_ASSIGN_OR_RETURN(RankFiles * f, FilesFor(origin.rank));
  // Details first, then the summary row: a crash in between never marks a call done without
  // its detail rows (msprobe wrote the summary first).
  std::fputs(rows.accuracy_details.c_str(), f->accuracy_details);
  std::fputs(rows.precision_details.c_str(), f->precision_details);
  std::fputs(rows.json.c_str(), f->jsonl);
  std::fputs(rows.accuracy_result.c_str(), f->accuracy_result);
  std::fputs(rows.precision_result.c_str(), f->precision_result);
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
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [rank, f] : ranks_) out.insert(out.end(), f->paths.begin(), f->paths.end());
  return out;
}

}  // namespace parity::server
