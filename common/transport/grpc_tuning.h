// Channel arguments shared by the agent's channel and the server, so both ends agree: keepalive,
// and flow-control/framing sizes for a stream that carries megabytes of tensors per second
// (gRPC's defaults are tuned for small RPCs). Measured by tests/bench/transport_bench.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace parity::common {

// (name, value) pairs for grpc::ChannelArguments::SetInt / ServerBuilder::AddChannelArgument.
std::vector<std::pair<std::string, int>> StreamChannelArgs();

// glibc returns large freed blocks to the kernel at once, so every received tensor-sized buffer
// page-faults afresh (measured: a fifth of the server's time). Keeps up to `bytes` of such blocks
// in the heap, and makes every thread allocate from one heap: a tensor is received on a gRPC
// thread and freed on a worker, and with per-thread heaps the next one is received on another
// thread whose heap has no free block (transport_bench: 7x the page faults, half the throughput;
// small allocations stay per thread in glibc's thread cache). Call once, early, before threads
// start, in a process that moves tensors (server, benchmarks).
void KeepLargeAllocations(std::size_t bytes);

}  // namespace parity::common
