// The agent's configuration key table (common/config/config_table.h): every key, its type, range,
// doc line and flag (the server's: server/config/server_config.h). Internal to
// common/config/config.cc and its tests.
#pragma once

#include "common/config/config.h"
#include "common/config/config_table.h"

namespace parity::common {

const KeyTable<AgentConfig>& AgentTable();

}  // namespace parity::common
