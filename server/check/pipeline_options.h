// The call pipeline's options (server/check/call_pipeline.h): the keys it reads, with their
// defaults, and the options of the checker and the error data it builds, nested in the parsed
// configuration as ServerConfig::check (server/config/server_config.h binds each key to its
// member here). Torch-free, a leaf above its parts' options.
#pragma once

#include <string>
#include <vector>

#include "server/replay/checker_options.h"
#include "server/results/error_data_options.h"

namespace parity::server {

struct PipelineOptions {
  std::vector<std::string> white_list;  // run_ut.white_list: only these calls are checked
  std::vector<std::string> black_list;  // run_ut.black_list: never these; wins over white_list
  std::string output_dir = "./";        // parity.output_dir: the result files
  // run_ut.error_data_path: where ut_error_data{ts}/ goes; relative: under output_dir.
  std::string error_data_path = "./";
  bool save_error_data = true;  // parity.save_error_data
  CheckerOptions checker;
  ErrorDataOptions error_data;

  // error_data_path, a relative one under output_dir.
  std::string ErrorDataPath() const;
};

}  // namespace parity::server
