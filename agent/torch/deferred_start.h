// The zero-code agent of a process that has no rank yet: a rank that torch.multiprocessing.spawn
// started learns its rank only from init_process_group(rank=...), after the agent's preload
// constructor ran. Such a process starts its agent once Python's torch.distributed is
// initialized, as the rank and world size it reports.
#pragma once

#include <functional>

namespace parity::agent {

// This process's rank and world size as Python's torch.distributed reports them, when the
// process runs Python, has imported torch.distributed and initialized its default group.
struct GroupRank {
  int rank = -1;
  int world_size = 0;
};
bool PythonGroupRank(GroupRank* out);

// Calls `start(rank)` once, on the thread of the first top-level operator call that ends after
// the process joined its process group (so the agent's hook starts between two calls, never
// inside one). Until then a light hook, without inputs or outputs, watches top-level calls.
void StartWhenInProcessGroup(std::function<void(const GroupRank&)> start);

}  // namespace parity::agent
