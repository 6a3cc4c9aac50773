#include "server/config/server_config.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/config/config_table.h"

namespace parity::server {
namespace {

using common::ConfigIssues;

// Checks that hold for any part of a server configuration. The choice between TLS and plaintext
// is checked once the file and the command line are merged (ValidateServerConfig), so a file
// may leave tls_path to a flag.
void CheckServerFields(const ServerConfig& c, std::vector<std::string>& errors) {
  if (c.port < 0 || c.port > 65535) {
    errors.push_back(absl::StrCat("run_ut.port: must be between 0 and 65535, got ", c.port));
  }
  if (c.parity.metrics_port < -1 || c.parity.metrics_port > 65535) {
    errors.push_back(absl::StrCat("parity.metrics_port: must be -1 (off) or 0..65535, got ",
                                  c.parity.metrics_port));
  }
  if (c.port > 0 && c.parity.metrics_port == c.port) {
    errors.push_back(absl::StrCat("parity.metrics_port: the same port as run_ut.port (", c.port,
                                  "): the metrics need a port of their own (0: any free one, "
                                  "-1: none)"));
  }
  if (c.parity.max_message_bytes < 4096 || c.parity.max_message_bytes > (uint64_t{1} << 31) - 1) {
    errors.push_back("parity.max_message_bytes: must be between 4KiB and 2GiB-1");
  }
  if (c.parity.queue_max_calls == 0) errors.push_back("parity.queue_max_calls: must be positive");
  common::CheckNames("run_ut.white_list", c.check.white_list, false, errors);
  common::CheckNames("run_ut.black_list", c.check.black_list, false, errors);
}

}  // namespace

std::vector<common::KeyDescription> ServerKeys() { return ServerTable().Descriptions(); }

absl::Status ValidateServerConfig(const ServerConfig& c) {
  std::vector<std::string> errors;
  CheckServerFields(c, errors);
  if (c.tls_path.empty() && !c.parity.plaintext) {
    errors.push_back(
        "run_ut.tls_path: TLS is required. Point tls_path (or --tls_path) at a folder holding "
        "server.crt and server.key (and ca.crt to require client certificates), or set "
        "parity.plaintext (--plaintext) to true (msprobe took an empty tls_path to mean "
        "plaintext; Parity asks explicitly)");
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n  "));
}

namespace {

// msprobe 26.x renamed the run_ut task and section to acc_check (mindstudio-probe 26.x's
// ACCCheckConfig: white_list, black_list, error_data_path; no online keys). A file with an
// acc_check section and no run_ut one is read as if it were run_ut's, its lines and messages
// keeping acc_check's name; both sections in one file are an error. True when it was.
bool ReadAccCheckAsRunUt(nlohmann::json& doc, ConfigIssues& issues) {
  if (!doc.contains("acc_check")) return false;
  if (doc.contains("run_ut")) {
    issues.errors.push_back(
        "run_ut, acc_check: one server section, under either name (acc_check is msprobe 26.x's "
        "name for run_ut), not both");
    return false;
  }
  doc["run_ut"] = doc["acc_check"];
  doc.erase("acc_check");
  std::map<std::string, int> renamed;
  for (const auto& [path, line] : issues.lines) {
    if (absl::StartsWith(path, "acc_check.") || path == "acc_check") {
      renamed.emplace("run_ut" + path.substr(std::string("acc_check").size()), line);
    }
  }
  issues.lines.insert(renamed.begin(), renamed.end());
  return true;
}

}  // namespace

absl::StatusOr<common::Parsed<ServerConfig>> ParseServerConfig(
    absl::string_view json_text, absl::string_view source,
    const std::vector<common::FlagValue>& flags) {
  nlohmann::json doc = nlohmann::json::object();
  if (!absl::StripAsciiWhitespace(json_text).empty()) {
    absl::StatusOr<nlohmann::json> parsed = common::ParseJson(json_text, source);
    if (!parsed.ok()) return parsed.status();
    doc = *std::move(parsed);
  }
  ConfigIssues issues;
  issues.lines = common::KeyLines(json_text);
  const bool acc_check = ReadAccCheckAsRunUt(doc, issues);
  common::ApplyFlags(ServerTable(), flags, "parity-server --help", doc, issues);
  common::Parsed<ServerConfig> out;
  ServerTable().Read(doc, out.config, issues);
  if (issues.errors.empty()) CheckServerFields(out.config, issues.errors);
  if (acc_check) {  // the messages name the section the file has
    for (auto* list : {&issues.errors, &issues.warnings}) {
      for (std::string& m : *list) m = absl::StrReplaceAll(m, {{"run_ut.", "acc_check."}});
    }
  }
  if (absl::Status s = common::Summarise(issues, source); !s.ok()) return s;
  out.warnings = std::move(issues.warnings);
  return out;
}

std::string DescribeServerConfig(const ServerConfig& c) { return ServerTable().Describe(c); }

}  // namespace parity::server
