// Judging an output the device sent as statistics only (DATA_FORM_STATS_ONLY: larger than the
// agent's parity.max_tensor_bytes): its summary against the same summary of the bench and golden
// outputs. Torch-free: the checker computes the references' statistics.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/wire/fields.h"
#include "common/wire/tensor_stats.h"
#include "server/compare/judge.h"
#include "server/compare/standards.h"

namespace parity::server {

// The "statistics" standard. inf/NaN counts must equal the reference's (the bench's when it
// ran, else the golden's). For each of mean, L2 norm, min and max, the device's distance to the
// golden, scaled (mean by the golden's RMS, L2 norm by itself, min and max by its largest
// magnitude), must be at most `limit` (the benchmark standard's RMSE ratio, 2) times the bench's
// own scaled distance, floored at the dtype's rtol (float32 2^-20, float16 2^-10, bfloat16 2^-8).
// Without a golden the bench is the reference and the floor alone bounds the distance. `bench` and
// `golden` may be null.
OutputJudgement JudgeStatistics(const common::TensorStatsValues& device,
                                const common::TensorStatsValues* bench,
                                const common::TensorStatsValues* golden, wire::DType dtype,
                                uint64_t numel, const StandardsTable& table);

}  // namespace parity::server
