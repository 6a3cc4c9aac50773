// The replica digests (agent/torch/replica_digest.h): CRC-32C of a host tensor's bytes, and
// poly64 held to its definition by a plain loop written here, with every single-word change seen.
#include "agent/torch/replica_digest.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <dlfcn.h>

#include <cstring>

#include "common/wire/crc32c.h"
#include "gtest/gtest.h"

namespace parity::agent {
namespace {

// poly64 as docs/replicas.md defines it: the sum over the 32-bit words w_i of the tensor's bytes
// (zero-padded to a whole word, each word read as a signed int32) of w_i * (2i + 1), mod 2^64.
uint64_t Poly64Reference(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  std::vector<uint8_t> bytes(c.nbytes());
  std::memcpy(bytes.data(), c.data_ptr(), bytes.size());
  while (bytes.size() % 4 != 0) bytes.push_back(0);
  uint64_t sum = 0;
  for (std::size_t i = 0; i < bytes.size() / 4; ++i) {
    int32_t w;
    std::memcpy(&w, bytes.data() + 4 * i, 4);
    sum += static_cast<uint64_t>(static_cast<int64_t>(w)) * (2 * i + 1);
  }
  return sum;
}

TEST(ReplicaDigestTest, Poly64IsItsDefinitionForEveryDtypeAndOddSizes) {
  at::manual_seed(3);
  for (const at::Tensor& t :
       {at::randn({1000}), at::randn({17}, at::kBFloat16), at::randn({3, 5}, at::kHalf),
        at::randint(-1000, 1000, {7}, at::kLong), at::randn({1}, at::kDouble)}) {
    SCOPED_TRACE(t.toString());
    EXPECT_EQ(static_cast<uint64_t>(Poly64(t).item<int64_t>()), Poly64Reference(t));
  }
}

TEST(ReplicaDigestTest, AnyOneFlippedBitChangesBothDigests) {
  const at::Tensor t = at::randn({64, 33});
  const TensorDigests before = DigestTensors({t});
  EXPECT_EQ(before.algorithm, "crc32c");
  EXPECT_EQ(before.bytes[0], 64u * 33u * 4u);
  EXPECT_EQ(before.digests[0],
            common::Crc32c(std::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes())));
  const uint64_t poly = static_cast<uint64_t>(Poly64(t).item<int64_t>());
  for (int64_t word : {int64_t{0}, int64_t{1000}, t.numel() - 1}) {
    for (int bit : {0, 22, 31}) {
      at::Tensor flipped = t.clone();
      flipped.view(at::kInt).view({-1})[word].bitwise_xor_(int32_t{1} << bit);
      EXPECT_NE(DigestTensors({flipped}).digests[0], before.digests[0]) << word << "/" << bit;
      EXPECT_NE(static_cast<uint64_t>(Poly64(flipped).item<int64_t>()), poly) << word << "/" << bit;
    }
  }
  // Equal bytes, equal digests: a copy, and a strided view of the same values.
  EXPECT_EQ(DigestTensors({t.clone()}).digests[0], before.digests[0]);
  EXPECT_EQ(DigestTensors({t.t().contiguous().t()}).digests[0], before.digests[0]);
}

TEST(ReplicaDigestTest, EmptyAndUndefinedTensorsDigestAsNothing) {
  const TensorDigests d = DigestTensors({at::Tensor(), at::empty({0})});
  EXPECT_EQ(d.digests, (std::vector<uint64_t>{0, 0}));
  EXPECT_EQ(d.bytes, (std::vector<uint64_t>{0, 0}));
}

// The test NPU's counters (tests/npu_device/npu_device.cc): [allocations, fallback calls, copies
// to the host, events recorded, events blocked on, stream syncs, bytes to the host].
std::vector<int64_t> NpuStats() {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("parity_test_npu::stats", "");
  return op.typed<std::vector<int64_t>()>().call();  // NOLINT(readability/casting)
}

// Device tensors are digested on the device: on the test NPU (PrivateUse1, registered as
// torch_npu registers itself; its memory unreadable from the host: a host read is a SIGSEGV),
// poly64 of each tensor is the CPU's poly64 of the same bytes, and what leaves the device is one
// copy of 8 bytes a tensor for the whole report, not the tensors.
TEST(ReplicaDigestTest, DeviceTensorsAreDigestedOnTheDeviceWithOneSmallCopy) {
  ASSERT_NE(dlopen(PARITY_TEST_NPU_DEVICE_LIB, RTLD_NOW | RTLD_GLOBAL), nullptr) << dlerror();
  const c10::Device npu(c10::DeviceType::PrivateUse1, 0);
  at::manual_seed(5);
  const std::vector<at::Tensor> host = {at::randn({4096}), at::randn({33, 7}, at::kBFloat16),
                                        at::randn({5}, at::kHalf)};
  std::vector<at::Tensor> device;
  uint64_t tensor_bytes = 0;
  for (const at::Tensor& t : host) {
    device.push_back(t.to(npu));
    tensor_bytes += t.nbytes();
  }
  const std::vector<int64_t> before = NpuStats();
  const TensorDigests d = DigestTensors(device);
  const std::vector<int64_t> after = NpuStats();
  EXPECT_EQ(d.algorithm, "poly64");
  ASSERT_EQ(d.digests.size(), host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    EXPECT_EQ(d.digests[i], Poly64Reference(host[i])) << i;
    EXPECT_EQ(d.bytes[i], host[i].nbytes()) << i;
  }
  EXPECT_GT(after[1], before[1]) << "the device's kernels ran";
  EXPECT_EQ(after[2] - before[2], 1) << "one copy to the host for the report";
  EXPECT_EQ(after[6] - before[6], static_cast<int64_t>(8 * host.size()))
      << "8 bytes a tensor, of " << tensor_bytes << " bytes of tensors";
}

}  // namespace
}  // namespace parity::agent
