// PARITY_HD marks a function that the host kernels and the CUDA kernel (device_compare.cu) both
// compile: __host__ __device__ under nvcc, nothing otherwise.
#pragma once

#if defined(__CUDACC__)
#define PARITY_HD __host__ __device__
#else
#define PARITY_HD
#endif
