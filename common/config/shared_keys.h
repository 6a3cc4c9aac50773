// What the agent's and the server's key tables (common/config/config_keys.cc,
// server/config/server_keys.cc) share: the words of two warnings, the log levels, the other
// msprobe tasks' sections, the reading of tls_path.
#pragma once

#include <string>
#include <vector>

#include "common/config/config_reader.h"

namespace parity::common::config_internal {

// nfs_path set: Parity has no shared-storage mode.
extern const char kNfsHelp[];
// tls_path empty without parity.plaintext.
extern const char kPlaintextWarning[];
// The top-level `precision` key, on either side.
extern const char kPrecisionHelp[];
std::vector<std::string> LogLevels();
// Keys of other msprobe tasks that may share one file with this side's keys (msprobe 8.x's,
// and 26.x's diff_check and nan_check).
extern const char* const kOtherTaskSections[7];

// tls_path on either side: "" is msprobe's way of asking for plaintext, taken with a warning
// (`*plaintext` set: the agent's parity.plaintext, or the server's).
void ReadTlsPath(ConfigReader& r, const std::string& name, std::string* tls_path, bool* plaintext);
std::string ShowTlsPath(const std::string& tls_path, bool plaintext);

}  // namespace parity::common::config_internal
