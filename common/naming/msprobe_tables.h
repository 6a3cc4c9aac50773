// msprobe's API tables: its functional APIs with the aten operators a call of each runs, and
// torch.distributed's APIs with their c10d operators. Shared by the name parser and msprobe's
// names (api_names.cc).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace parity::common::internal {

using OpList = std::vector<std::string>;

// msprobe's functional APIs (torch.nn.functional, also reached as torch.X or bare names) and the
// aten operators a call of each runs at the top level, the first being the one it usually is.
const std::map<std::string, OpList, std::less<>>& FunctionalOps();
// msprobe's Tensor methods whose operator is not the one of the same name.
const std::map<std::string, OpList, std::less<>>& TensorOps();
// torch.distributed's APIs and the c10d operators they run.
const std::map<std::string, std::string, std::less<>>& DistributedOps();

}  // namespace parity::common::internal
