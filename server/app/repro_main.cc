// parity-repro: reruns the calls saved as error data (server/results/error_data.h) on this host's
// bench device and as the float64 golden, judges the saved device outputs (or others given) by
// the same standards, and prints each verdict next to the one the server gave.
//
//   parity-repro [--config=server.json] [--KEY=VALUE ...] [--api=TEXT] [--device_outputs=DIR]
//                ERROR_DATA_DIR
//
// The checker is configured by the server's own key table (server/config/server_keys.cc):
// --config reads a server config file, and every parity-server configuration flag applies
// (--bench_device, --golden, --golden_device, --random_checks, --standards_file,
// --npu_reference, --reference_libraries, --operator_catalogue, ...), with the server's
// defaults; the transport's keys are read and not used.
// ERROR_DATA_DIR is a ut_error_data{ts}/ folder (it holds manifest.jsonl) or a folder holding
// such folders. --device_outputs judges other device outputs instead of the saved ones: files
// at the saved device files' relative paths under DIR (what `python3 -m parity.repro
// --rerun-on DEVICE` writes after rerunning the calls on DEVICE).
// Exit status: 0 every verdict reproduced, 1 some differ, 2 bad usage or unreadable data.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/crash_report.h"
#include "common/naming/naming.h"
#include "common/naming/operator_catalogue.h"
#include "common/torch/torch_pch.h"
#include "nlohmann/json.hpp"
#include "parity/v1/parity.pb.h"
#include "server/app/command_line.h"
#include "server/call/verdict_encoder.h"
#include "server/compare/standards.h"
#include "server/replay/call_checker.h"
#include "server/replay/call_values.h"
#include "server/replay/operator_libraries.h"
#include "server/replay/stages.h"

namespace {

namespace fs = std::filesystem;
using parity::server::CallChecker;
using parity::server::CheckerOptions;
using parity::server::StandardsTable;
namespace v1 = parity::v1;

struct Args {
  parity::server::ServerConfig config;  // the server's keys, with the server's defaults
  std::string api;
  std::string device_outputs;
  std::string dir;
};

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "parity-repro: %s\nusage: parity-repro [--config=server.json] [--KEY=VALUE ...] "
               "[--api=TEXT] [--device_outputs=DIR] ERROR_DATA_DIR\n  --KEY=VALUE: any "
               "parity-server configuration flag (--bench_device=auto|cpu|cuda[:N], "
               "--golden_device, --standards_file=F, --npu_reference=false, "
               "--reference_libraries=A.so,B.so, --operator_catalogue=F, ...; parity-server "
               "--help lists them)\n",
               why.c_str());
  return 2;
}

// The manifests under `dir`: its own, or those of the ut_error_data folders in it.
std::vector<fs::path> Manifests(const fs::path& dir) {
  std::vector<fs::path> out;
  if (fs::exists(dir / "manifest.jsonl")) return {dir / "manifest.jsonl"};
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory() && fs::exists(entry.path() / "manifest.jsonl")) {
      out.push_back(entry.path() / "manifest.jsonl");
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// One manifest line's call: its identity as the message the server had, without values, and
// the values loaded from the files, given to the checker as they are.
struct LoadedCall {
  v1::ApiCall identity;
  parity::server::DecodedCall values;
};

// The values the files `names` under `folder` (or, for `device_outputs`, under that) hold.
absl::StatusOr<parity::server::Stack> LoadValues(const nlohmann::json& names,
                                                 const fs::path& folder) {
  parity::server::Stack values;
  for (const auto& name : names) {
    absl::StatusOr<c10::IValue> v =
        parity::server::LoadValue((folder / name.get<std::string>()).string());
    if (!v.ok()) return v.status();
    values.push_back(*std::move(v));
  }
  return values;
}

// The call of one manifest line, with its values read from the files.
absl::StatusOr<LoadedCall> LoadCall(const nlohmann::json& line, const fs::path& folder,
                                    const std::string& device_outputs) {
  LoadedCall loaded;
  v1::ApiCall& call = loaded.identity;
  call.set_op_name(line.value("op", ""));
  call.set_overload(line.value("overload", ""));
  call.set_phase(line.value("phase", "") == "backward" ? v1::PHASE_BACKWARD : v1::PHASE_FORWARD);
  call.set_step(line.value("step", int64_t{0}));
  call.set_call_index(line.value("call_index", uint64_t{0}));
  call.set_module_path(line.value("module_path", ""));
  absl::StatusOr<c10::OperatorHandle> op =
      parity::server::ResolveOp(call.op_name(), call.overload());
  if (!op.ok()) return op.status();
  const nlohmann::json& files = line.at("files");
  absl::StatusOr<parity::server::Stack> inputs = LoadValues(files.at("inputs"), folder);
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<parity::server::Stack> outputs =
      LoadValues(files.at("device"), device_outputs.empty() ? folder : fs::path(device_outputs));
  if (!outputs.ok()) return outputs.status();
  absl::StatusOr<parity::server::DecodedCall> values =
      parity::server::DecodedFromValues(op->schema(), *std::move(inputs), *std::move(outputs));
  if (!values.ok()) return values.status();
  loaded.values = *std::move(values);
  return loaded;
}

// Each output's status, standard and failed metric with its value, from the check itself.
std::string Describe(const parity::server::CallOutcome& check) {
  std::vector<std::string> parts;
  for (const parity::server::OutputOutcome& o : check.outputs) {
    const parity::server::OutputJudgement& j = o.judgement;
    std::string part = absl::StrCat("output ", o.index, " ", parity::server::StatusText(j.status),
                                    " (", parity::server::StandardName(j.standard));
    const absl::string_view failed = parity::server::MetricName(j.failed_metric);
    if (!failed.empty()) {
      std::optional<double> value;
      for (const auto& [name, v] : parity::server::OutputMetricValues(j)) {
        if (name == failed) value = v;
      }
      absl::StrAppend(&part, ", ", failed, value ? absl::StrCat(" ", *value) : "");
    }
    absl::StrAppend(&part, ")");
    parts.push_back(std::move(part));
  }
  return absl::StrJoin(parts, "; ");
}

// What rerunning one manifest line found.
enum class Rerun { kNotSelected, kUnreadableLine, kUnloadable, kReproduced, kDiffers };

// Reruns the call of one manifest line and prints its verdict beside the server's.
Rerun RerunLine(const std::string& text, const fs::path& manifest, const Args& a,
                const CallChecker& checker) {
  const nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
  if (line.is_discarded() || !line.is_object()) {
    std::printf("%s: an unreadable line\n", manifest.string().c_str());
    return Rerun::kUnreadableLine;
  }
  const std::string api = line.value("api", "?");
  if (!a.api.empty() && !absl::StrContains(api, a.api)) return Rerun::kNotSelected;
  const std::string where =
      absl::StrCat(api, " ", line.value("phase", ""), " (rank ", line.value("rank", 0), ", step ",
                   line.value("step", int64_t{0}), ")");
  absl::StatusOr<LoadedCall> call;
  try {
    call = LoadCall(line, manifest.parent_path(), a.device_outputs);
  } catch (const std::exception& e) {  // a manifest line without the keys it needs
    call = absl::InvalidArgumentError(e.what());
  }
  if (!call.ok()) {
    std::printf("%s: cannot load: %s\n", where.c_str(),
                std::string(call.status().message()).c_str());
    return Rerun::kUnloadable;
  }
  const parity::server::ServerCall server_call(call->identity);
  const parity::server::CallOutcome check = checker.Judge(server_call, std::move(call->values));
  const std::string now(parity::server::StatusText(check.status));
  const std::string saved = line.value("status", "");
  const bool same = now == saved;
  std::printf("%s: %s on %s (server: %s) %s\n  %s%s%s\n", where.c_str(), now.c_str(),
              checker.bench_device().c_str(), saved.c_str(), same ? "reproduced" : "NOT REPRODUCED",
              Describe(check).c_str(), check.message.empty() ? "" : "\n  ", check.message.c_str());
  return same ? Rerun::kReproduced : Rerun::kDiffers;
}

int Run(const Args& a) {
  const parity::server::ServerOptions& o = a.config.parity;
  // As the server reads them: the catalogue, then the standards, then the libraries.
  if (!o.operator_catalogue.empty()) {
    if (absl::Status s = parity::common::AddToOperatorCatalogue(o.operator_catalogue); !s.ok()) {
      return Usage(std::string(s.message()));
    }
  }
  StandardsTable standards = StandardsTable::Default();
  if (!o.standards_file.empty()) {
    absl::StatusOr<StandardsTable> t = StandardsTable::Load(o.standards_file);
    if (!t.ok()) return Usage(std::string(t.status().message()));
    standards = *std::move(t);
  }
  absl::StatusOr<std::vector<parity::server::LoadedLibrary>> libraries =
      parity::server::LoadOperatorLibraries(o.npu_reference, o.reference_libraries);
  if (!libraries.ok()) return Usage(std::string(libraries.status().message()));
  CheckerOptions options = a.config.check.checker;
  options.limits = o.limits;
  options.save_error_data = false;  // reruns write nothing
  absl::StatusOr<std::unique_ptr<CallChecker>> checker = CallChecker::Create(options, standards);
  if (!checker.ok()) return Usage(std::string(checker.status().message()));
  const std::vector<fs::path> manifests = Manifests(a.dir);
  if (manifests.empty()) return Usage(absl::StrCat("no manifest.jsonl in or under ", a.dir));
  int total = 0, reproduced = 0, unreadable = 0;
  for (const fs::path& manifest : manifests) {
    std::ifstream in(manifest);
    std::string text;
    while (std::getline(in, text)) {
      if (text.empty()) continue;
      const Rerun r = RerunLine(text, manifest, a, **checker);
      total += r == Rerun::kUnreadableLine || r == Rerun::kNotSelected ? 0 : 1;
      reproduced += r == Rerun::kReproduced ? 1 : 0;
      unreadable += r == Rerun::kUnreadableLine || r == Rerun::kUnloadable ? 1 : 0;
    }
  }
  std::printf("%d of %d calls reproduced the server's verdict%s\n", reproduced, total,
              unreadable > 0 ? absl::StrCat("; ", unreadable, " could not be read").c_str() : "");
  if (unreadable > 0) return 2;
  return reproduced == total ? 0 : 1;
}

}  // namespace

// Splits argv: parity-repro's own flags and ERROR_DATA_DIR into `a`, the rest into the server's
// configuration (--config, configuration flags). Returns an exit status when done (help, usage).
std::optional<int> ParseArgs(int argc, char** argv, Args* a) {
  std::vector<const char*> server_args = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (absl::StartsWith(arg, "--api=")) {
      a->api = arg.substr(6);
    } else if (absl::StartsWith(arg, "--device_outputs=")) {
      a->device_outputs = arg.substr(17);
    } else if (arg == "-h" || arg == "--help") {
      Usage("reruns the calls saved as error data");
      return 0;
    } else if (absl::StartsWith(arg, "-")) {
      server_args.push_back(argv[i]);
    } else if (!a->dir.empty()) {
      return Usage("one ERROR_DATA_DIR only");
    } else {
      a->dir = arg;
    }
  }
  if (a->dir.empty()) return Usage("ERROR_DATA_DIR is missing");
  absl::StatusOr<parity::server::CommandLine> line =
      parity::server::ParseCommandLine(static_cast<int>(server_args.size()), server_args.data());
  if (!line.ok()) return Usage(std::string(line.status().message()));
  if (line->version || line->check_config || line->list_metrics || line->list_config ||
      !line->port_file.empty()) {
    return Usage(
        "--version, --check_config, --list_metrics, --list_config and --port_file are "
        "parity-server's");
  }
  auto parsed = parity::server::LoadConfiguration(*line);
  if (!parsed.ok()) return Usage(std::string(parsed.status().message()));
  for (const std::string& w : parsed->warnings)
    std::fprintf(stderr, "parity-repro: %s\n", w.c_str());
  a->config = std::move(parsed->config);
  return std::nullopt;
}

int main(int argc, char** argv) {
  parity::common::InstallCrashReport(argv[0]);
  Args a;
  if (std::optional<int> done = ParseArgs(argc, argv, &a)) return *done;
  try {
    return Run(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parity-repro: %s\n", e.what());
    return 2;
  }
}
