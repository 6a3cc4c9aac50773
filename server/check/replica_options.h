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
  // Bytes of reports held at once (waiting, or complete and not yet compared), at most: past
  // it the groups that waited longest are compared with what they have. A report holds up to
  // 65,536 digests with names of up to 1 KiB each, so the count of groups alone bounds nothing.
  uint64_t max_waiting_bytes = uint64_t{256} << 20;
};

}  // namespace parity::server
