// What the agent's and the server's key tables (config_keys.cc, config_keys_server.cc) share:
// the words of two warnings, the log levels, the other msprobe tasks' sections. Internal to
// common/config.
#pragma once

#include <string>
#include <vector>

namespace parity::common::config_internal {

// nfs_path set: Parity has no shared-storage mode.
extern const char kNfsHelp[];
// tls_path empty without parity.plaintext.
extern const char kPlaintextWarning[];
std::vector<std::string> LogLevels();
// Keys of other msprobe tasks that may share one file with this side's keys.
extern const char* const kOtherTaskSections[5];

}  // namespace parity::common::config_internal
