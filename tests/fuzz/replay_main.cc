// Driver for the fuzz target without libFuzzer: runs files given as arguments, or (no arguments)
// a deterministic corpus of valid messages and mutations of them.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "parity/v1/parity.pb.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
std::string DecodeFuzzSeed(int which);

namespace {

int Run(const std::string& bytes) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  LLVMFuzzerInitialize(&argc, &argv);
  if (argc > 1) {
    for (int i = 1; i < argc; ++i) {
      std::ifstream in(argv[i], std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      Run(ss.str());
    }
    std::printf("ran %d input(s)\n", argc - 1);
    return 0;
  }
  std::mt19937_64 rng(12345);
  int runs = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = DecodeFuzzSeed(i);
    const int mutations = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < mutations; ++k) {
      switch (rng() % 3) {
        case 0:
          bytes[rng() % bytes.size()] = static_cast<char>(rng());
          break;
        case 1:
          bytes.resize(rng() % (bytes.size() + 1));
          break;
        default:
          bytes.insert(rng() % (bytes.size() + 1), 1, static_cast<char>(rng()));
          break;
      }
      if (bytes.empty()) bytes = "x";
    }
    Run(bytes);
    ++runs;
  }
  std::printf("decoder survived %d mutated messages\n", runs);
  return 0;
}
