// The generator's kind from libtorch's device type name, and from a GeneratorState whose agent
// sent the kind or did not.
#include "common/wire/generator_device.h"
#include "parity/v1/parity.pb.h"

#include "gtest/gtest.h"

namespace parity::common {
namespace {

TEST(GeneratorDeviceTest, LibtorchsNamesMapToTheirKinds) {
  EXPECT_EQ(GeneratorDeviceOf("cpu"), v1::GENERATOR_DEVICE_CPU);
  EXPECT_EQ(GeneratorDeviceOf("cuda"), v1::GENERATOR_DEVICE_CUDA);
  EXPECT_EQ(GeneratorDeviceOf("npu"), v1::GENERATOR_DEVICE_NPU);
  EXPECT_EQ(GeneratorDeviceOf("privateuseone"), v1::GENERATOR_DEVICE_PRIVATEUSE1);
  EXPECT_EQ(GeneratorDeviceOf("xpu"), v1::GENERATOR_DEVICE_OTHER);
  EXPECT_EQ(GeneratorDeviceOf("CPU"), v1::GENERATOR_DEVICE_OTHER)
      << "libtorch's names are lower case";
  EXPECT_EQ(GeneratorDeviceOf(""), v1::GENERATOR_DEVICE_OTHER);
}

TEST(GeneratorDeviceTest, TheSentKindWinsAndAnOlderAgentsNameIsMapped) {
  v1::GeneratorState state;
  state.set_device_type("cuda");
  EXPECT_EQ(GeneratorDeviceOf(state), v1::GENERATOR_DEVICE_CUDA) << "no kind sent: the name's";
  state.set_device(v1::GENERATOR_DEVICE_NPU);
  EXPECT_EQ(GeneratorDeviceOf(state), v1::GENERATOR_DEVICE_NPU);
}

}  // namespace
}  // namespace parity::common
