// The summary of a tensor that travels in place of its contents when it is too large to send
// (DATA_FORM_STATS_ONLY): parity.v1.TensorStats's fields as a plain struct, for code that judges
// it without protobuf's headers (server/compare/statistics.h). Made from the message at the edge
// (server/call/decode_values.cc), and of a tensor by common/torch/tensor_stats.h.
#pragma once

#include <cstdint>

namespace parity::common {

struct TensorStatsValues {
  bool any_finite = false;  // min, max, mean and l2_norm are set only then (0 otherwise)
  double min = 0, max = 0, mean = 0, l2_norm = 0;
  uint64_t nan_count = 0, inf_count = 0;
};

}  // namespace parity::common
