// Element access for the comparison loops: load any wire float type as double, and round a double
// to a device dtype (round-to-nearest-even), without libtorch; on the host and (PARITY_HD) on a
// GPU.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "server/compare/host_device.h"

namespace parity::server::fp {

PARITY_HD inline float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

PARITY_HD inline uint32_t FloatToBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// IEEE binary16 -> float (exact).
PARITY_HD inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return BitsToFloat(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    if (mant == 0) return BitsToFloat(sign);
    // Subnormal: value = mant * 2^-24.
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return BitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

// float -> IEEE binary16 bits, round to nearest even, overflow to inf, NaN kept NaN.
PARITY_HD inline uint16_t FloatToHalf(float f) {
  const uint32_t x = FloatToBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) return sign | (abs > 0x7F800000u ? 0x7E00 : 0x7C00);
  if (abs >= 0x477FF000u) return sign | 0x7C00;      // rounds to >= 65520: overflow
  if (abs < 0x38800000u) {                           // below the smallest normal half: subnormal
    const float v = BitsToFloat(abs) * 16777216.0f;  // scale by 2^24: units of the subnormal step
    return sign | static_cast<uint16_t>(std::nearbyint(v));
  }
  uint32_t mant = abs & 0x7FFFFFu;
  uint32_t exp = (abs >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // carries into the exponent correctly
  return sign | static_cast<uint16_t>(h);
}

PARITY_HD inline float BFloat16ToFloat(uint16_t b) {
  return BitsToFloat(static_cast<uint32_t>(b) << 16);
}

PARITY_HD inline uint16_t FloatToBFloat16(float f) {
  const uint32_t x = FloatToBits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN
  const uint32_t rounding = 0x7FFF + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

// Traits per element type: Load as double, Round a double to this type (returned as double),
// the largest finite value, machine epsilon, and whether ULPs are computed in float64.
// All 65536 float16 values as floats (256 KiB, built once): loads become one table read.
inline const float* HalfTable() {
  static const float* table = [] {
    auto* t = new float[65536];
    for (uint32_t h = 0; h < 65536; ++h) t[h] = HalfToFloat(static_cast<uint16_t>(h));
    return t;
  }();
  return table;
}

struct Half {
  using Storage = uint16_t;
  PARITY_HD static double Load(const void* p, int64_t i) {
#if defined(__CUDA_ARCH__)
    return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
#else
    return HalfTable()[static_cast<const uint16_t*>(p)[i]];
#endif
  }
  PARITY_HD static double Round(double v) {
    return HalfToFloat(FloatToHalf(static_cast<float>(v)));
  }
  static constexpr double kMax = 65504.0;
  static constexpr double kEps = 0.0009765625;  // 2^-10
};

struct BFloat16 {
  using Storage = uint16_t;
  PARITY_HD static double Load(const void* p, int64_t i) {
    return BFloat16ToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  PARITY_HD static double Round(double v) {
    return BFloat16ToFloat(FloatToBFloat16(static_cast<float>(v)));
  }
  static constexpr double kMax = 3.3895313892515355e38;
  static constexpr double kEps = 0.0078125;  // 2^-7
};

struct Float {
  using Storage = float;
  PARITY_HD static double Load(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
  PARITY_HD static double Round(double v) { return static_cast<float>(v); }
  static constexpr double kMax = std::numeric_limits<float>::max();
  static constexpr double kEps = std::numeric_limits<float>::epsilon();
};

struct Double {
  using Storage = double;
  PARITY_HD static double Load(const void* p, int64_t i) {
    return static_cast<const double*>(p)[i];
  }
  PARITY_HD static double Round(double v) { return v; }
  static constexpr double kMax = std::numeric_limits<double>::max();
  static constexpr double kEps = std::numeric_limits<double>::epsilon();
};

}  // namespace parity::server::fp
