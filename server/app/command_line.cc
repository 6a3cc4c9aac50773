#include "server/app/command_line.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace parity::server {
namespace {

// The command's own flags: name -> (takes a value, help line).
struct OwnFlag {
  bool takes_value;
  const char* help;
};
const std::map<std::string, OwnFlag>& OwnFlags() {
  static const auto* flags = new std::map<std::string, OwnFlag>{
      {"config",
       {true, "msprobe-style config.json (task \"run_ut\", a run_ut section, a parity section)"}},
      {"port_file",
       {true, "write \"<grpc port> <metrics port>\" here once listening (scripts using port 0)"}},
      {"check_config",
       {false,
        "read the file and flags, load the certificates, print the effective settings "
        "and exit (0 when valid, 2 when not)"}},
      {"list_metrics", {false, "print every exported metric (name, type, labels, meaning)"}},
      {"list_config",
       {false, "print every configuration key (path, flag, type, default, meaning)"}},
      {"config_docs",
       {false, "print docs/configuration.md's key tables, made from the key tables themselves"}},
      {"help", {false, "this text"}},
      {"version", {false, "the server's version"}},
  };
  return *flags;
}

enum class FlagArity { kUnknown, kBool, kValue };

// Whether the configuration flag `name` (or `noNAME`) exists and takes a separate value.
FlagArity ConfigFlagArity(absl::string_view name) {
  for (const common::KeyDescription& k : ServerKeys()) {
    if (k.flag == absl::StrCat("--", name)) {
      return k.kind == "bool" ? FlagArity::kBool : FlagArity::kValue;
    }
    if (k.kind == "bool" && absl::StartsWith(name, "no") &&
        k.flag == absl::StrCat("--", name.substr(2))) {
      return FlagArity::kBool;
    }
  }
  return FlagArity::kUnknown;
}

}  // namespace

absl::StatusOr<CommandLine> ParseCommandLine(int argc, const char* const* argv) {
  CommandLine out;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument \"", arg, "\" (flags start with --)"));
    }
    std::string name(arg.substr(0, arg.find('=')));
    std::optional<std::string> value;
    if (arg.find('=') != absl::string_view::npos)
      value = std::string(arg.substr(arg.find('=') + 1));
    auto own = OwnFlags().find(name);
    // An unknown flag takes no value here: common::ParseServerConfig reports it by name.
    const bool takes_value = own != OwnFlags().end() ? own->second.takes_value
                                                     : ConfigFlagArity(name) == FlagArity::kValue;
    if (takes_value && !value) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, ": needs a value"));
      }
      value = argv[++i];
    }
    if (own == OwnFlags().end()) {
      out.config_flags.push_back({name, value});
    } else if (name == "config") {
      out.config_path = *value;
    } else if (name == "port_file") {
      out.port_file = *value;
    } else {
      if (value && *value != "true" && *value != "1") {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      }
      bool* flag = name == "help"           ? &out.help
                   : name == "version"      ? &out.version
                   : name == "check_config" ? &out.check_config
                   : name == "list_metrics" ? &out.list_metrics
                   : name == "config_docs"  ? &out.config_docs
                                            : &out.list_config;
      *flag = true;
    }
  }
  return out;
}

std::string HelpText() {
  std::string out =
      "parity-server: the Parity benchmark server. It replays operator calls streamed by Parity\n"
      "agents on the bench device and as a float64 golden, and judges them by msprobe's\n"
      "precision standard.\n\n"
      "  parity-server --tls_path=certs/ --output_dir=results/\n"
      "  parity-server --config=config.json\n"
      "  parity-server --plaintext --port=0 --port_file=ports.txt\n\n"
      "Precedence: built-in defaults < --config file < flags. Every configuration key has a flag\n"
      "(docs/configuration.md).\n\nCommand flags:\n";
  for (const auto& [name, f] : OwnFlags()) {
    absl::StrAppendFormat(&out, "  --%-28s %s\n", name + (f.takes_value ? "=VALUE" : ""), f.help);
  }
  out += "\nConfiguration flags (key, type, default):\n";
  for (const common::KeyDescription& k : ServerKeys()) {
    if (k.flag.empty()) continue;
    absl::StrAppendFormat(
        &out, "  %s (%s, %s, default %s)\n", k.flag, k.path,
        k.choices.empty() ? k.kind : absl::StrCat("one of ", absl::StrJoin(k.choices, "|")),
        k.default_value.empty() ? "none" : k.default_value);
    out += common::KeyDocAsText(k.doc, 6, 100);
  }
  return out;
}

absl::StatusOr<common::Parsed<ServerConfig>> LoadConfiguration(const CommandLine& line) {
  std::string text;
  std::string source = "command line";
  if (!line.config_path.empty()) {
    absl::StatusOr<std::string> file = common::ReadFile(line.config_path);
    if (!file.ok()) return file.status();
    text = *std::move(file);
    source = line.config_path;
  }
  return ParseServerConfig(text, source, line.config_flags);
}

}  // namespace parity::server
