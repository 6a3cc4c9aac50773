// The agent's and the server's configuration key tables (common/config_table.h): every key, its
// type, range, doc line and flag. Internal to common/config.cc and its tests.
#pragma once

#include "common/config.h"
#include "common/config_table.h"

namespace parity::common {

const KeyTable<AgentConfig>& AgentTable();
const KeyTable<ServerConfig>& ServerTable();

}  // namespace parity::common
