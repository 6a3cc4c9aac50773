// parity-server's command line. Every server configuration key has a flag named after the last
// part of its path (--workers, --tls_path, --max_dims, ...), generated from the key table in
// common/config/config.cc, so the flags, --help and the docs cannot drift apart. Precedence:
// built-in defaults, then the --config file, then flags.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/config.h"
#include "server/config/server_config.h"

namespace parity::server {

struct CommandLine {
  std::string config_path;                      // --config
  std::string port_file;                        // --port_file
  bool help = false;                            // --help
  bool version = false;                         // --version
  bool check_config = false;                    // --check_config
  bool list_metrics = false;                    // --list_metrics
  bool list_config = false;                     // --list_config
  bool config_docs = false;                     // --config_docs
  std::vector<common::FlagValue> config_flags;  // the rest: configuration keys
};

// Splits argv into the flags above and configuration flags. INVALID_ARGUMENT for a positional
// argument or a flag that needs a value and has none; unknown configuration flags are reported
// by common::ParseServerConfig, which knows the keys.
absl::StatusOr<CommandLine> ParseCommandLine(int argc, const char* const* argv);

// The --help text: usage, the command's own flags, then every configuration flag with its key,
// type, default and meaning.
std::string HelpText();

// Reads the --config file (if any) and applies the configuration flags.
absl::StatusOr<common::Parsed<ServerConfig>> LoadConfiguration(const CommandLine& line);

}  // namespace parity::server
