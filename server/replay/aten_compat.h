// aten operators of newer torch versions that the bench's libtorch may lack, registered on the
// bench with their decomposition, so that calls from a training on a newer torch replay instead
// of being SKIP (issue 49; docs/operators.md#a-training-on-another-torch): torch 2.x optimizers'
// foreach operators and scaled_dot_product_attention, and the attention kernels behind it
// (server/replay/sdpa_compat.h).
#pragma once

#include <string>
#include <vector>

namespace parity::server {

// Registers, once per process, each operator of the table that the bench's libtorch does not
// have (on a libtorch that has them, nothing); returns the names registered ("aten::_foreach_
// lerp_.Scalar", ...). Thread-safe.
const std::vector<std::string>& RegisterMissingAtenOps();

}  // namespace parity::server
