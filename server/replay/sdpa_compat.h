// torch 2.x's attention kernels (the CPU flash kernel and its backward, CUDA's flash and
// memory-efficient ones and theirs) and inductor's _reinterpret_tensor, registered with their
// decomposition on a bench whose libtorch lacks them (server/replay/sdpa_compat.cc), so that an
// LLM's attention backward from a torch 2.x training is checked by an older server.
#pragma once

#include <string>
#include <vector>

namespace parity::server {

// Registers each such operator the bench's libtorch does not have, appending its name
// ("aten::_scaled_dot_product_flash_attention_for_cpu_backward") to `added`. Called once, from
// RegisterMissingAtenOps.
void RegisterMissingSdpaOps(std::vector<std::string>* added);

}  // namespace parity::server
