// The CUDA compare's stand-in for a build without it (no CUDA in the server's libtorch, or no
// nvcc): every call says so, and the server compares on the host.
#include "server/compare/device_compare.h"

namespace parity::server::internal {
namespace {
constexpr char kNotBuilt[] =
    "CUDA compare: this server was built without the CUDA compare (its libtorch has no CUDA, or "
    "CMake found no "
    "nvcc): outputs are compared on the host";
}  // namespace

bool DeviceCompareBuilt() { return false; }

std::string DeviceAccumulate(int, DeviceSpan, DeviceSpan, int64_t, const DTypeConstants&, double,
                             Accumulator*) {
  return kNotBuilt;
}

std::string DeviceScaledCosine(int, DeviceSpan, DeviceSpan, int64_t, double, double, double*) {
  return kNotBuilt;
}

std::string DeviceFindNonFinite(int, DeviceSpan, DeviceSpan, int64_t, NonFiniteScan*) {
  return kNotBuilt;
}

}  // namespace parity::server::internal
