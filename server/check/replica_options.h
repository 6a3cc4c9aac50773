// The replica checker's options (server/check/replica_check.h): parity.replica_wait_ms and the
// bound on groups waiting, nested in the parsed configuration as ServerConfig::replicas.
#pragma once

#include <cstdint>

namespace parity::server {

struct ReplicaOptions {
  // How long a group's first report waits for the others (parity.replica_wait_ms): the slowest
  // rank's lag behind the fastest, plus its network; past it, what came is compared and the
  // ranks that did not report are counted missing.
  uint32_t wait_ms = 30000;
  // Groups waiting at once, at most: past it the oldest is compared with what it has (memory
  // stays bounded whatever the agents send).
  uint32_t max_waiting_groups = 4096;
};

}  // namespace parity::server
