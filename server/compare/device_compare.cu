// The comparison's pass on a CUDA device: one grid-stride kernel runs element.h's per-element rule
// (the host kernels' definition) with an Accumulator per thread, each block merges its threads'
// in shared memory, and one block merges the blocks' in a fixed order: the sums are float64, the
// counts exact, the result the same for the same input on the same card. Only the merged
// Accumulator (about 200 bytes) comes back to the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <mutex>

#include "server/compare/device_compare.h"
#include "server/compare/element.h"

namespace parity::server::internal {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxBlocks = 1024;
constexpr int kMaxDevices = 64;

template <typename F>
void VisitKind(FloatKind k, F&& f) {
  switch (k) {
    case FloatKind::kHalf:
      return f(fp::Half{});
    case FloatKind::kBFloat16:
      return f(fp::BFloat16{});
    case FloatKind::kFloat:
      return f(fp::Float{});
    case FloatKind::kDouble:
      return f(fp::Double{});
  }
}

// Merges the kThreads accumulators of `shared` into shared[0] (a tree, the same order each run).
__device__ void MergeBlock(Accumulator* shared) {
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) Merge(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
}

template <typename T, typename R>
__global__ void __launch_bounds__(kThreads)
    AccumulateKernel(const void* tp, const void* rp, int64_t n, DTypeConstants c, double eps,
                     Accumulator* partials) {
  __shared__ __align__(16) unsigned char raw[kThreads * sizeof(Accumulator)];
  auto* shared = reinterpret_cast<Accumulator*>(raw);
  Accumulator a;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    AccumulateElement<T, R>(T::Load(tp, i), R::Load(rp, i), c, eps, a);
  }
  shared[threadIdx.x] = a;
  MergeBlock(shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = shared[0];
}

// One block: partials[0..blocks) merged into *total.
__global__ void __launch_bounds__(kThreads)
    MergeKernel(const Accumulator* partials, int blocks, Accumulator* total) {
  __shared__ __align__(16) unsigned char raw[kThreads * sizeof(Accumulator)];
  auto* shared = reinterpret_cast<Accumulator*>(raw);
  Accumulator a;
  for (int i = static_cast<int>(threadIdx.x); i < blocks; i += kThreads) Merge(a, partials[i]);
  shared[threadIdx.x] = a;
  MergeBlock(shared);
  if (threadIdx.x == 0) *total = shared[0];
}

template <typename T, typename R>
__global__ void __launch_bounds__(kThreads)
    ScaledCosineKernel(const void* tp, const void* rp, int64_t n, double mt, double mr,
                       double* sums) {
  __shared__ double s[3][kThreads];
  double dot = 0, nt = 0, nr = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const double t = T::Load(tp, i) / mt, r = R::Load(rp, i) / mr;
    dot += t * r;
    nt += t * t;
    nr += r * r;
  }
  s[0][threadIdx.x] = dot;
  s[1][threadIdx.x] = nt;
  s[2][threadIdx.x] = nr;
  __syncthreads();
  for (int k = kThreads / 2; k > 0; k /= 2) {
    if (static_cast<int>(threadIdx.x) < k) {
      for (int j = 0; j < 3; ++j) s[j][threadIdx.x] += s[j][threadIdx.x + k];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    for (int j = 0; j < 3; ++j) atomicAdd(&sums[j], s[j][0]);
  }
}

// found[0]: the count; found[1]: the first index (starts at n); values[0..1]: its two values.
template <typename T, typename R>
__global__ void __launch_bounds__(kThreads)
    NonFiniteKernel(const void* tp, const void* rp, int64_t n, unsigned long long* found) {
  __shared__ unsigned long long first;
  __shared__ unsigned long long count;
  if (threadIdx.x == 0) {
    first = static_cast<unsigned long long>(n);
    count = 0;
  }
  __syncthreads();
  unsigned long long mine = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    if (DeviceAloneNonFinite<T>(T::Load(tp, i), R::Load(rp, i))) {
      if (mine++ == 0) atomicMin(&first, static_cast<unsigned long long>(i));
    }
  }
  if (mine != 0) atomicAdd(&count, mine);
  __syncthreads();
  if (threadIdx.x == 0 && count != 0) {
    atomicAdd(&found[0], count);
    atomicMin(&found[1], first);
  }
}

template <typename T, typename R>
__global__ void LoadPairKernel(const void* tp, const void* rp, int64_t i, double* values) {
  values[0] = T::Load(tp, i);
  values[1] = R::Load(rp, i);
}

// The calling thread's CUDA device set to `device` for a scope, and set back after.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) error_ = cudaSetDevice(device);
  }
  ~DeviceScope() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) {
      cudaSetDevice(previous_);
    }
  }
  cudaError_t error() const { return error_; }

 private:
  int previous_ = -1;
  cudaError_t error_ = cudaSuccess;
};

// The blocks a pass over n elements uses: enough to fill the card (4 per multiprocessor), none
// idle on a small output.
int Blocks(int device, int64_t n) {
  static std::array<int, kMaxDevices> multiprocessors{};
  static std::mutex mutex;
  int sms = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (device < kMaxDevices) sms = multiprocessors[device];
  }
  if (sms == 0) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      sms = 32;
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (device < kMaxDevices) multiprocessors[device] = sms;
  }
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({wanted, 4 * sms, kMaxBlocks})));
}

// Each thread's device scratch (the blocks' partial accumulators and the total), per device,
// allocated on first use and freed when the thread ends.
struct Scratch {
  std::array<Accumulator*, kMaxDevices> partials{};
  ~Scratch() {
    for (int d = 0; d < kMaxDevices; ++d) {
      if (partials[d] != nullptr) {
        cudaSetDevice(d);
        cudaFree(partials[d]);
      }
    }
  }
};

cudaError_t ScratchFor(int device, Accumulator** out) {
  thread_local Scratch scratch;
  if (device >= kMaxDevices) return cudaErrorInvalidDevice;
  Accumulator*& p = scratch.partials[device];
  if (p == nullptr) {
    const cudaError_t e = cudaMalloc(&p, (kMaxBlocks + 1) * sizeof(Accumulator));
    if (e != cudaSuccess) {
      p = nullptr;
      return e;
    }
  }
  *out = p;
  return cudaSuccess;
}

std::string Error(const char* what, cudaError_t e) {
  return std::string(kDeviceCompareError) + what + ": " + cudaGetErrorString(e);
}

// Runs f() and then waits for the per-thread stream; the first CUDA error, or "".
template <typename F>
std::string Run(int device, const char* what, F&& f) {
  DeviceScope scope(device);
  if (scope.error() != cudaSuccess) return Error("selecting the device", scope.error());
  cudaGetLastError();  // an error torch's code left in this thread is not the compare's
  cudaError_t e = f();
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamPerThread);
  return e == cudaSuccess ? std::string() : Error(what, e);
}

}  // namespace

bool DeviceCompareBuilt() { return true; }

std::string DeviceAccumulate(int device, DeviceSpan tested, DeviceSpan reference, int64_t n,
                             const DTypeConstants& c, double eps, Accumulator* out) {
  return Run(device, "the metrics pass", [&]() -> cudaError_t {
    Accumulator* partials = nullptr;
    if (cudaError_t e = ScratchFor(device, &partials); e != cudaSuccess) return e;
    const int blocks = Blocks(device, n);
    VisitKind(tested.kind, [&](auto t) {
      VisitKind(reference.kind, [&](auto r) {
        AccumulateKernel<decltype(t), decltype(r)><<<blocks, kThreads, 0, cudaStreamPerThread>>>(
            tested.data, reference.data, n, c, eps, partials);
      });
    });
    MergeKernel<<<1, kThreads, 0, cudaStreamPerThread>>>(partials, blocks, partials + kMaxBlocks);
    return cudaMemcpyAsync(out, partials + kMaxBlocks, sizeof(Accumulator), cudaMemcpyDeviceToHost,
                           cudaStreamPerThread);
  });
}

std::string DeviceScaledCosine(int device, DeviceSpan tested, DeviceSpan reference, int64_t n,
                               double mt, double mr, double* cosine) {
  double sums[3] = {0, 0, 0};
  std::string error = Run(device, "the scaled cosine", [&]() -> cudaError_t {
    Accumulator* scratch = nullptr;
    if (cudaError_t e = ScratchFor(device, &scratch); e != cudaSuccess) return e;
    auto* d = reinterpret_cast<double*>(scratch);
    if (cudaError_t e = cudaMemsetAsync(d, 0, sizeof(sums), cudaStreamPerThread); e != cudaSuccess)
      return e;
    VisitKind(tested.kind, [&](auto t) {
      VisitKind(reference.kind, [&](auto r) {
        ScaledCosineKernel<decltype(t), decltype(r)>
            <<<Blocks(device, n), kThreads, 0, cudaStreamPerThread>>>(tested.data, reference.data,
                                                                      n, mt, mr, d);
      });
    });
    return cudaMemcpyAsync(sums, d, sizeof(sums), cudaMemcpyDeviceToHost, cudaStreamPerThread);
  });
  *cosine = sums[0] / (std::sqrt(sums[1]) * std::sqrt(sums[2]));
  return error;
}

std::string DeviceFindNonFinite(int device, DeviceSpan tested, DeviceSpan reference, int64_t n,
                                NonFiniteScan* out) {
  unsigned long long found[2] = {0, static_cast<unsigned long long>(n)};
  double values[2] = {0, 0};
  std::string error = Run(device, "the inf/NaN scan", [&]() -> cudaError_t {
    Accumulator* scratch = nullptr;
    if (cudaError_t e = ScratchFor(device, &scratch); e != cudaSuccess) return e;
    auto* d = reinterpret_cast<unsigned long long*>(scratch);
    if (cudaError_t e = cudaMemcpyAsync(d, found, sizeof(found), cudaMemcpyHostToDevice,
                                        cudaStreamPerThread);
        e != cudaSuccess)
      return e;
    VisitKind(tested.kind, [&](auto t) {
      VisitKind(reference.kind, [&](auto r) {
        NonFiniteKernel<decltype(t), decltype(r)>
            <<<Blocks(device, n), kThreads, 0, cudaStreamPerThread>>>(tested.data, reference.data,
                                                                      n, d);
      });
    });
    return cudaMemcpyAsync(found, d, sizeof(found), cudaMemcpyDeviceToHost, cudaStreamPerThread);
  });
  if (!error.empty() || found[0] == 0) {
    out->count = 0;
    return error;
  }
  error = Run(device, "reading the first inf/NaN", [&]() -> cudaError_t {
    Accumulator* scratch = nullptr;
    if (cudaError_t e = ScratchFor(device, &scratch); e != cudaSuccess) return e;
    auto* d = reinterpret_cast<double*>(scratch);
    VisitKind(tested.kind, [&](auto t) {
      VisitKind(reference.kind, [&](auto r) {
        LoadPairKernel<decltype(t), decltype(r)><<<1, 1, 0, cudaStreamPerThread>>>(
            tested.data, reference.data, static_cast<int64_t>(found[1]), d);
      });
    });
    return cudaMemcpyAsync(values, d, sizeof(values), cudaMemcpyDeviceToHost, cudaStreamPerThread);
  });
  out->count = static_cast<int64_t>(found[0]);
  out->first_index = static_cast<int64_t>(found[1]);
  out->device = values[0];
  out->reference = values[1];
  return error;
}

}  // namespace parity::server::internal
