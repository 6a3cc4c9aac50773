#include "server/results/error_data.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "nlohmann/json.hpp"
#include "server/call/error_files.h"

namespace parity::server {
namespace {

namespace fs = std::filesystem;

// A path component from a name the agent chose: no separators, no "..", no control characters.
std::string Component(const std::string& name) {
  std::string out;
  for (char c : name) {
    out.push_back(c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 ? '_' : c);
  }
  if (out.empty() || out == "." || out == "..") out = absl::StrCat("_", out);
  return out;
}

nlohmann::json Names(const std::vector<std::string>& files, const std::string& dir) {
  nlohmann::json a = nlohmann::json::array();
  for (const std::string& f : files) a.push_back(absl::StrCat(dir, "/", f));
  return a;
}

}  // namespace

ErrorData::ErrorData(ErrorDataOptions options, const StandardsTable& standards, Counted counted)
    : options_(std::move(options)), standards_(standards), counted_(std::move(counted)) {}

std::string ErrorData::folder() const {
  absl::MutexLock lock(&mu_);
  return folder_;
}

ErrorDataOutcome ErrorData::Account(ErrorDataOutcome outcome, const ServerCall& call,
                                    uint64_t bytes) {
  if (counted_) counted_(outcome);
  if (outcome == ErrorDataOutcome::kOverBudget && !warned_budget_) {
    warned_budget_ = true;
    common::LogWarning(absl::StrCat(
        "error data: ", call.names.api, " needs ", bytes, " bytes and ", bytes_, " of ",
        options_.max_bytes,
        " (parity.error_data_max_bytes) are used: further error calls are "
        "counted in parity_server_error_data_total{outcome=\"over_budget\"}, not saved"));
  }
  return outcome;
}

ErrorDataOutcome ErrorData::Failed(const std::string& why, const ServerCall& call, uint64_t bytes) {
  uint64_t suppressed = 0;
  if (failures_.Allow(&suppressed)) {
    common::LogError(
        absl::StrCat("error data not saved: ", why, " (", suppressed, " more suppressed)"));
  }
  return Account(ErrorDataOutcome::kFailed, call, bytes);
}

ErrorDataOutcome ErrorData::Save(const CallOrigin& origin, const ServerCall& call,
                                 const CallOutcome& check) {
  if (!check.values) return ErrorDataOutcome::kFailed;
  const uint64_t bytes = SavedBytes(*check.values);
  const std::string op_key = absl::StrCat(call.id.op_name, ".", call.id.overload);
  absl::MutexLock lock(&mu_);
  uint32_t& saved_of_op = per_op_[op_key];
  if (options_.max_per_op > 0 && saved_of_op >= options_.max_per_op) {
    return Account(ErrorDataOutcome::kOverOpCount, call, bytes);
  }
  if (bytes_ + bytes > options_.max_bytes) {
    return Account(ErrorDataOutcome::kOverBudget, call, bytes);
  }
  try {
    std::error_code ec;
    if (folder_.empty()) {
      std::string folder = absl::StrCat(options_.path, "/ut_error_data", Now14());
      fs::create_directories(folder, ec);
      if (ec) {
        return Failed(absl::StrCat("cannot create ", folder, ": ", ec.message()), call, bytes);
      }
      folder_ = std::move(folder);
      common::LogInfo(absl::StrCat("error data of calls judged error go to ", folder_));
    }
    const std::string relative =
        absl::StrCat(origin.run_id.empty() ? "run" : Component(origin.run_id), "/rank", origin.rank,
                     "/step", call.id.step);
    const std::string dir = absl::StrCat(folder_, "/", relative);
    fs::create_directories(dir, ec);
    if (ec) {
      return Failed(absl::StrCat("cannot create ", dir, ": ", ec.message()), call, bytes);
    }
    const std::string prefix = Component(call.DataName());
    absl::StatusOr<SavedFiles> files = SaveCallValues(*check.values, dir, prefix);
    if (!files.ok()) {
      return Failed(std::string(files.status().message()), call, bytes);
    }
    // The manifest line: the JSON-lines record of the call, and what reruns it.
    CallRows rows = RowsOf(origin, call, check, standards_);
    nlohmann::json line = nlohmann::json::parse(rows.json, nullptr, /*allow_exceptions=*/false);
    if (line.is_discarded()) line = nlohmann::json::object();
    line["schema"] = SchemaOf(*check.values);
    line["files"] = {{"inputs", Names(files->inputs, relative)},
                     {"device", Names(files->device, relative)},
                     {"bench", Names(files->bench, relative)},
                     {"golden", Names(files->golden, relative)}};
    std::ofstream manifest(absl::StrCat(folder_, "/manifest.jsonl"), std::ios::app);
    manifest << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    manifest.close();
    if (!manifest) {
      return Failed(absl::StrCat("cannot append to ", folder_, "/manifest.jsonl"), call, bytes);
    }
    ++saved_of_op;
    bytes_ += bytes;
    return Account(ErrorDataOutcome::kSaved, call, bytes);
  } catch (const std::exception& e) {  // bad_alloc, filesystem errors: never the check's
    return Failed(absl::StrCat(call.names.api, ": ", e.what()), call, bytes);
  }
}

}  // namespace parity::server
