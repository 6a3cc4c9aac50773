// The agent's and the server's configuration key tables (common/config/config_table.h): every key,
// its type, range, doc line and flag. Internal to common/config/config.cc and its tests.
#pragma once

#include "common/config/config.h"
#include "common/config/config_table.h"

namespace parity::common {

const KeyTable<AgentConfig>& AgentTable();
const KeyTable<ServerConfig>& ServerTable();

}  // namespace parity::common
