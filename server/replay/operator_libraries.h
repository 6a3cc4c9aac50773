// Reference operator libraries: shared libraries that register, in this process's dispatcher,
// operators its libtorch lacks (torch_npu's fused kernels, a user's custom operators) with
// kernels composed of aten ops. Once loaded, their calls replay like any aten call.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace parity::server {

struct LoadedLibrary {
  std::string path;
  std::vector<std::string> operators;  // "npu::npu_rms_norm", the ones it added
};

// The bundled libparity_npu_reference.so: beside this executable, in ../lib/parity, or in the
// build tree; empty when none is found.
std::string FindNpuReferenceLibrary();

// Loads (dlopen, once per process) the bundled NPU library when `npu_reference`, then each of
// `paths`. An unreadable or failing library is an error naming it and the loader's reason.
absl::StatusOr<std::vector<LoadedLibrary>> LoadOperatorLibraries(
    bool npu_reference, const std::vector<std::string>& paths);

}  // namespace parity::server
