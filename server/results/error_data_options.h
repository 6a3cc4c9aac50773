// The error data's options (server/results/error_data.h): its keys, with their defaults, nested
// in the parsed configuration as ServerConfig::check.error_data. A leaf.
#pragma once

#include <cstdint>
#include <string>

namespace parity::server {

struct ErrorDataOptions {
  uint64_t max_bytes = uint64_t{1} << 30;  // parity.error_data_max_bytes: one server run's
  uint32_t max_per_op = 3;  // parity.error_data_per_op: per operator and overload; 0 = no limit

  // The folder ut_error_data{ts}/ is made in: set by the call pipeline from run_ut.error_data_path
  // and parity.output_dir (PipelineOptions::ErrorDataPath).
  std::string path;
};

}  // namespace parity::server
