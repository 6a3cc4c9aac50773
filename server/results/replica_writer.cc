#include "server/results/replica_writer.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/compare/judge.h"
#include "server/results/result_rows.h"

namespace parity::server {
namespace {

constexpr char kBom[] = "\xEF\xBB\xBF";

std::string Ranks(const std::vector<int32_t>& ranks) { return absl::StrJoin(ranks, " "); }

}  // namespace

const std::vector<std::string>& ReplicaWriter::Header() {
  static const std::vector<std::string> header = {
      "Run",           "Step",           "Kind",           "Operation",
      "Sequence",      "Group",          "Status",         "Digests",
      "Mismatches",    "First Mismatch", "Agreeing Ranks", "Differing Ranks",
      "Missing Ranks", "Message"};
  return header;
}

absl::StatusOr<std::unique_ptr<ReplicaWriter>> ReplicaWriter::Create(const std::string& output_dir,
                                                                     std::string timestamp) {
  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat(output_dir, ": cannot create the output directory (", ec.message(), ")"));
  }
  return std::unique_ptr<ReplicaWriter>(
      new ReplicaWriter(output_dir, timestamp.empty() ? Now14() : std::move(timestamp)));
}

ReplicaWriter::ReplicaWriter(std::string output_dir, std::string timestamp)
    : output_dir_(std::move(output_dir)), timestamp_(std::move(timestamp)) {}

absl::Status ReplicaWriter::OpenLocked() {
  const std::filesystem::path dir(output_dir_);
  PARITY_ASSIGN_OR_RETURN(
      const bool resumed,
      csv_.Open((dir / absl::StrCat("replica_checking_result_", timestamp_, ".csv")).string()));
  if (!resumed) PARITY_RETURN_IF_ERROR(csv_.Append(kBom + CsvRow(Header()), false));
  PARITY_ASSIGN_OR_RETURN(
      const bool unused,
      jsonl_.Open((dir / absl::StrCat("parity_replicas_", timestamp_, ".jsonl")).string()));
  (void)unused;
  open_ = true;
  return absl::OkStatus();
}

absl::Status ReplicaWriter::Write(const ReplicaOutcome& o) {
  const ReplicaOutcome::Mismatch* first = o.mismatches.empty() ? nullptr : &o.mismatches[0];
  const std::string row = CsvRow(
      {o.run_id, absl::StrCat(o.step), o.kind, o.op, absl::StrCat(o.sequence), Ranks(o.group),
       std::string(StatusText(o.status)), absl::StrCat(o.digests), absl::StrCat(o.mismatch_count),
       first != nullptr ? first->name : " ", first != nullptr ? Ranks(first->agreeing) : " ",
       first != nullptr ? Ranks(first->differing) : " ", o.missing.empty() ? " " : Ranks(o.missing),
       o.message});
  nlohmann::json j = {{"run_id", o.run_id},
                      {"step", o.step},
                      {"kind", o.kind},
                      {"op", o.op},
                      {"sequence", o.sequence},
                      {"group", o.group},
                      {"status", std::string(StatusText(o.status))},
                      {"digests", o.digests},
                      {"mismatch_count", o.mismatch_count},
                      {"reported", o.reported},
                      {"missing", o.missing},
                      {"message", o.message}};
  nlohmann::json mismatches = nlohmann::json::array();
  for (const ReplicaOutcome::Mismatch& m : o.mismatches) {
    mismatches.push_back({{"name", m.name}, {"agreeing", m.agreeing}, {"differing", m.differing}});
  }
  j["mismatches"] = std::move(mismatches);
  absl::MutexLock lock(&mu_);
  if (!open_) PARITY_RETURN_IF_ERROR(OpenLocked());
  PARITY_RETURN_IF_ERROR(csv_.Append(row));
  return jsonl_.Append(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::vector<std::string> ReplicaWriter::Paths() const {
  absl::MutexLock lock(&mu_);
  if (!open_) return {};
  return {csv_.path(), jsonl_.path()};
}

}  // namespace parity::server
