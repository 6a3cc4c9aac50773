// Allocation failures while checking, for real: each case runs in a child process (gtest's
// "threadsafe" death-test style re-runs this binary up to the case) whose address space is then
// limited (RLIMIT_AS) to what it already uses plus a margin sized so that exactly one stage
// cannot get its memory. The outcome must be a verdict that is never PASS, with the code the
// proto promises, and the process must live.
#include <ATen/Parallel.h>
#include <malloc.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/torch/torch_pch.h"
#include "gtest/gtest.h"
#include "parity/v1/parity.pb.h"
#include "server/call/error_files.h"
#include "server/replay/call_checker.h"
#include "server/replay/call_values.h"
#include "server/replay/stages.h"
#include "tests/testing/op_cases.h"
#include "tests/testing/test_certs.h"

namespace parity::server {
namespace {

// The process's address space now, in bytes (/proc/self/status VmSize).
uint64_t AddressSpace() {
  std::ifstream status("/proc/self/status");
  std::string key;
  uint64_t kib = 0;
  while (status >> key) {
    if (key == "VmSize:") {
      status >> kib;
      break;
    }
  }
  return kib * 1024;
}

// Large blocks mapped and unmapped one by one from here on, never kept by malloc for reuse: a
// big tensor freed before the limit would otherwise leave its memory in malloc's heap (glibc
// raises its mmap threshold to the largest block freed), and a later allocation of that size
// would succeed under any limit, depending on what the process did before. Called first in each
// child.
void NoReuseOfFreedBlocks() {
  mallopt(M_MMAP_THRESHOLD, 128 << 10);  // fixed: no dynamic raise
  mallopt(M_TRIM_THRESHOLD, 0);
  malloc_trim(0);
}

// Limits this process's address space to its size now plus `margin` (the soft limit only, so
// that RestoreAddressSpace can lift it again).
void LimitAddressSpace(uint64_t margin) {
  malloc_trim(0);
  struct rlimit limit {};
  getrlimit(RLIMIT_AS, &limit);
  limit.rlim_cur = static_cast<rlim_t>(AddressSpace() + margin);
  if (setrlimit(RLIMIT_AS, &limit) != 0) std::perror("setrlimit");
}

void RestoreAddressSpace() {
  struct rlimit limit {};
  getrlimit(RLIMIT_AS, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_AS, &limit);
}

std::unique_ptr<CallChecker> Checker() {
  parity::server::CheckerOptions options;
  options.bench_device = "cpu";
  options.golden_device = parity::server::GoldenDevice::kCpu;
  auto checker = CallChecker::Create(options, StandardsTable::Default());
  return checker.ok() ? *std::move(checker) : nullptr;
}

// A float16 sum of 8 Mi elements (sent inline: 16 MiB): the decoded input takes 16 MiB, the
// bench's copy of it 16 MiB, the float64 golden's copy 64 MiB. With 40 MiB to spare (and no freed
// block reused: NoReuseOfFreedBlocks), the bench runs and the golden cannot be allocated. The
// device's sum is the bench's:
// before, the call was judged against the bench alone and passed (so would have a wrong output
// that the bench's two-way check lets through, where the golden's standard would not); now it is
// not checked: SKIP with RESOURCE_EXHAUSTED, saying so.
void GoldenOutOfMemoryIsNeverAPass() {
  NoReuseOfFreedBlocks();
  at::set_num_threads(1);  // no thread to start under the limit
  const std::unique_ptr<CallChecker> checker = Checker();
  if (!checker) std::exit(2);
  // Everything lazy (kernels, allocator pools) initialised before the limit, by a small call.
  checker->Judge(
      testing::BuildCall("aten::sum", "", {testing::R({64}, 1, at::kHalf), c10::IValue()}));
  const at::Tensor x = testing::R({8 << 20}, 2, at::kHalf) * 0.01;
  const v1::ApiCall call = testing::BuildCall("aten::sum", "", {x, c10::IValue()});
  LimitAddressSpace(uint64_t{40} << 20);
  const CallOutcome check = checker->Judge(call);
  RestoreAddressSpace();
  std::fprintf(stderr, "status %d, code %d: %s\n", static_cast<int>(check.status),
               static_cast<int>(check.error_code), check.message.c_str());
  const bool skipped =
      check.status == CheckStatus::kSkip &&
      check.error_code == absl::StatusCode::kResourceExhausted &&
      check.message.find("out of memory replaying the golden") != std::string::npos &&
      check.outputs.size() == 1 && check.outputs[0].judgement.status == CheckStatus::kSkip;
  std::exit(skipped ? 0 : 1);
}

// Decoding a call's 16 MiB input with 8 MiB to spare: the server's memory, not the call, is at
// fault, so the call is not rejected (REJECTED means malformed or over a cap) but not checked:
// SKIP with RESOURCE_EXHAUSTED. Before, it was REJECTED.
void DecodingOutOfMemoryIsNotARejection() {
  NoReuseOfFreedBlocks();
  at::set_num_threads(1);
  const std::unique_ptr<CallChecker> checker = Checker();
  if (!checker) std::exit(2);
  checker->Judge(testing::BuildCall("aten::neg", "", {testing::R({64}, 1)}));
  const v1::ApiCall call = testing::BuildCall("aten::neg", "", {testing::R({4 << 20}, 5)});
  LimitAddressSpace(uint64_t{8} << 20);
  const CallOutcome check = checker->Judge(call);
  RestoreAddressSpace();
  std::fprintf(stderr, "status %d, code %d: %s\n", static_cast<int>(check.status),
               static_cast<int>(check.error_code), check.message.c_str());
  std::exit(check.status == CheckStatus::kSkip &&
                    check.error_code == absl::StatusCode::kResourceExhausted &&
                    check.message.find("out of memory decoding") != std::string::npos
                ? 0
                : 1);
}

// Error data of a 64 MiB tensor, saved with 32 MiB to spare: libtorch's pickle_save built the
// archive in memory (another 64 MiB) and, when that ran out, its archive writer's destructor
// threw and the server aborted. The file is now written as it is made: it succeeds, and loads.
void ErrorDataOfABigTensorUnderALimitIsSavedWhole() {
  NoReuseOfFreedBlocks();
  at::set_num_threads(1);
  const std::string dir = testing::MakeTempDir("parity_oom_");
  CallValues values;
  values.schema = "aten::neg(Tensor self) -> Tensor";
  values.inputs = {testing::R({16 << 20}, 3)};
  {  // lazy initialisation of the writer's code paths, before the limit
    CallValues small;
    small.inputs = {testing::R({4}, 4)};
    if (!SaveCallValues(small, dir, "warm").ok()) std::exit(2);
  }
  LimitAddressSpace(uint64_t{32} << 20);
  const absl::StatusOr<SavedFiles> saved = SaveCallValues(values, dir, "big");
  RestoreAddressSpace();
  if (!saved.ok()) {
    std::fprintf(stderr, "not saved: %s\n", std::string(saved.status().message()).c_str());
    std::exit(1);
  }
  const absl::StatusOr<c10::IValue> loaded = LoadValue(dir + "/" + saved->inputs.at(0));
  const bool equal =
      loaded.ok() && loaded->isTensor() && loaded->toTensor().equal(values.inputs[0].toTensor());
  std::exit(equal ? 0 : 3);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;  // its shadow memory makes an address-space limit meaningless
#else
constexpr bool kSanitized = false;
#endif

TEST(OutOfMemoryTest, AGoldenWithoutMemoryIsNeverAPass) {
  if (kSanitized) GTEST_SKIP() << "not under AddressSanitizer";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(GoldenOutOfMemoryIsNeverAPass(), ::testing::ExitedWithCode(0), "");
}

TEST(OutOfMemoryTest, DecodingWithoutMemoryIsNotARejection) {
  if (kSanitized) GTEST_SKIP() << "not under AddressSanitizer";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(DecodingOutOfMemoryIsNotARejection(), ::testing::ExitedWithCode(0), "");
}

TEST(OutOfMemoryTest, ErrorDataUnderAnAddressSpaceLimitIsSavedNotAborted) {
  if (kSanitized) GTEST_SKIP() << "not under AddressSanitizer";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ErrorDataOfABigTensorUnderALimitIsSavedWhole(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace parity::server
