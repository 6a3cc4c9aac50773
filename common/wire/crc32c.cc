#include "common/wire/crc32c.h"

#include <array>
#include <cstring>

#if defined(__aarch64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define PARITY_CRC_AARCH64 1
#include <arm_acle.h>
#include <sys/auxv.h>
#endif

namespace parity::common {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // reflected Castagnoli polynomial

// Slicing-by-8 tables, built once at compile time.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
  }
};
constexpr Tables kTables;

// The CPU's CRC-32C instruction (x86-64 SSE4.2 crc32, AArch64's CRC extension crc32c), where the
// CPU has it: three independent streams over blocks of kLong (then kShort) bytes hide the
// instruction's three-cycle latency, and their CRCs are joined by shifting each over the blocks
// after it (a 32x32 GF(2) operator, applied through four 256-entry tables). Mark Adler's method.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PARITY_CRC_HW 1
#define PARITY_CRC_TARGET __attribute__((target("sse4.2")))
PARITY_CRC_TARGET inline uint64_t CrcWord(uint64_t crc, uint64_t w) {
  return __builtin_ia32_crc32di(crc, w);
}
PARITY_CRC_TARGET inline uint32_t CrcByte(uint32_t crc, unsigned char b) {
  return __builtin_ia32_crc32qi(crc, b);
}
bool CpuHasCrc() { return __builtin_cpu_supports("sse4.2"); }
#elif defined(PARITY_CRC_AARCH64)
#define PARITY_CRC_HW 1
#define PARITY_CRC_TARGET __attribute__((target("+crc")))
PARITY_CRC_TARGET inline uint64_t CrcWord(uint64_t crc, uint64_t w) {
  return __crc32cd(static_cast<uint32_t>(crc), w);
}
PARITY_CRC_TARGET inline uint32_t CrcByte(uint32_t crc, unsigned char b) {
  return __crc32cb(crc, b);
}
bool CpuHasCrc() { return (getauxval(AT_HWCAP) & (1UL << 7)) != 0; }  // HWCAP_CRC32
#endif

#if defined(PARITY_CRC_HW)
constexpr std::size_t kLong = 8192, kShort = 256;

// GF(2) 32x32 matrices as 32 columns: mat * vec, and mat * mat.
uint32_t Times(const uint32_t* mat, uint32_t vec) {
  uint32_t sum = 0;
  for (; vec != 0; vec >>= 1, ++mat) {
    if (vec & 1) sum ^= *mat;
  }
  return sum;
}
void Square(uint32_t* square, const uint32_t* mat) {
  for (int n = 0; n < 32; ++n) square[n] = Times(mat, mat[n]);
}

// The operator that appends `len` zero bytes (a power of two) to a CRC register, as tables.
struct Zeros {
  uint32_t t[4][256];
  explicit Zeros(std::size_t len) {
    uint32_t even[32], odd[32];
    odd[0] = kPoly;  // one zero bit
    for (int n = 1; n < 32; ++n) odd[n] = 1u << (n - 1);
    Square(even, odd);  // two zero bits
    Square(odd, even);  // four
    const uint32_t* op = even;
    for (;;) {  // eight zero bits in even, then 16 in odd, ... until len is used up
      Square(even, odd);
      op = even;
      if ((len >>= 1) == 0) break;
      Square(odd, even);
      op = odd;
      if ((len >>= 1) == 0) break;
    }
    for (uint32_t n = 0; n < 256; ++n) {
      for (int k = 0; k < 4; ++k) t[k][n] = Times(op, n << (8 * k));
    }
  }
  uint32_t Shift(uint32_t crc) const {
    return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24];
  }
};

inline uint64_t Load64(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// Three streams over blocks of `block` bytes while at least three are left.
PARITY_CRC_TARGET uint64_t Interleaved(uint64_t crc0, const unsigned char*& p, std::size_t& n,
                                       std::size_t block, const Zeros& zeros) {
  while (n >= 3 * block) {
    uint64_t crc1 = 0, crc2 = 0;
    for (const unsigned char* end = p + block; p < end; p += 8) {
      crc0 = CrcWord(crc0, Load64(p));
      crc1 = CrcWord(crc1, Load64(p + block));
      crc2 = CrcWord(crc2, Load64(p + 2 * block));
    }
    crc0 = zeros.Shift(static_cast<uint32_t>(crc0)) ^ crc1;
    crc0 = zeros.Shift(static_cast<uint32_t>(crc0)) ^ crc2;
    p += 2 * block;
    n -= 3 * block;
  }
  return crc0;
}

PARITY_CRC_TARGET uint32_t HardwareCrc(const unsigned char* p, std::size_t n, uint32_t crc) {
  static const Zeros* const kLongZeros = new Zeros(kLong);
  static const Zeros* const kShortZeros = new Zeros(kShort);
  uint64_t c = ~crc;
  for (; n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0; ++p, --n) {
    c = CrcByte(static_cast<uint32_t>(c), *p);
  }
  c = Interleaved(c, p, n, kLong, *kLongZeros);
  c = Interleaved(c, p, n, kShort, *kShortZeros);
  for (; n >= 8; p += 8, n -= 8) c = CrcWord(c, Load64(p));
  for (; n > 0; ++p, --n) c = CrcByte(static_cast<uint32_t>(c), *p);
  return ~static_cast<uint32_t>(c);
}
#endif

}  // namespace

uint32_t Crc32cPortable(std::string_view data, uint32_t crc) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  const auto& t = kTables.t;
  crc = ~crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // little-endian hosts only (checked in CMake)
    word ^= crc;
    crc = t[7][word & 0xFF] ^ t[6][(word >> 8) & 0xFF] ^ t[5][(word >> 16) & 0xFF] ^
          t[4][(word >> 24) & 0xFF] ^ t[3][(word >> 32) & 0xFF] ^ t[2][(word >> 40) & 0xFF] ^
          t[1][(word >> 48) & 0xFF] ^ t[0][word >> 56];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
  return ~crc;
}

bool Crc32cUsesCpuInstruction() {
#if defined(PARITY_CRC_HW)
  static const bool hw = CpuHasCrc();
  return hw;
#else
  return false;
#endif
}

uint32_t Crc32c(std::string_view data, uint32_t crc) {
#if defined(PARITY_CRC_HW)
  if (Crc32cUsesCpuInstruction()) {
    return HardwareCrc(reinterpret_cast<const unsigned char*>(data.data()), data.size(), crc);
  }
#endif
  return Crc32cPortable(data, crc);
}

}  // namespace parity::common
