// parity.v1's field numbers and enum values, for code that writes the wire format without
// protobuf's headers (common/wire/proto_writer.h: the agent's torch half). Kept equal to
// proto/parity/v1/parity.proto by static_asserts against the generated code
// (common/wire/fields_check.cc), so a renumbered field does not build.
#pragma once

#include <cstdint>

namespace parity::wire {

// message AgentMessage
inline constexpr uint32_t kAgentMessageCall = 2;

// message ApiCall
inline constexpr uint32_t kApiCallInputs = 12;
inline constexpr uint32_t kApiCallOutputs = 13;
inline constexpr uint32_t kApiCallKeptBlobIds = 20;
inline constexpr uint32_t kApiCallInputsWritten = 24;
inline constexpr uint32_t kApiCallUncheckedWrites = 25;

// message InputWritten
inline constexpr uint32_t kInputWrittenIndex = 1;
inline constexpr uint32_t kInputWrittenName = 2;
inline constexpr uint32_t kInputWrittenChangedElements = 3;
inline constexpr uint32_t kInputWrittenElements = 4;

// message Value (oneof kind)
inline constexpr uint32_t kValueTensor = 1;
inline constexpr uint32_t kValueInt = 2;
inline constexpr uint32_t kValueDouble = 3;
inline constexpr uint32_t kValueBool = 4;
inline constexpr uint32_t kValueString = 5;
inline constexpr uint32_t kValueNone = 6;
inline constexpr uint32_t kValueList = 7;
inline constexpr uint32_t kValueDevice = 8;
inline constexpr uint32_t kValueDType = 9;
inline constexpr uint32_t kValueLayout = 10;
inline constexpr uint32_t kValueMemoryFormat = 11;
inline constexpr uint32_t kValueComplex = 12;

// message ValueList
inline constexpr uint32_t kListKind = 1;
inline constexpr uint32_t kListItems = 2;

// message Tensor
inline constexpr uint32_t kTensorDType = 1;
inline constexpr uint32_t kTensorShape = 2;
inline constexpr uint32_t kTensorForm = 3;
inline constexpr uint32_t kTensorData = 4;
inline constexpr uint32_t kTensorBlobId = 5;
inline constexpr uint32_t kTensorStats = 6;
inline constexpr uint32_t kTensorCrc32c = 7;
inline constexpr uint32_t kTensorDevice = 8;
inline constexpr uint32_t kTensorOriginalStrides = 9;
inline constexpr uint32_t kTensorRequiresGrad = 10;

// message TensorStats
inline constexpr uint32_t kStatsMin = 1;
inline constexpr uint32_t kStatsMax = 2;
inline constexpr uint32_t kStatsMean = 3;
inline constexpr uint32_t kStatsL2Norm = 4;
inline constexpr uint32_t kStatsNanCount = 5;
inline constexpr uint32_t kStatsInfCount = 6;

// message Device, Complex
inline constexpr uint32_t kDeviceType = 1;
inline constexpr uint32_t kDeviceIndex = 2;
inline constexpr uint32_t kComplexReal = 1;
inline constexpr uint32_t kComplexImag = 2;

// message GeneratorState
inline constexpr uint32_t kGeneratorDeviceType = 1;
inline constexpr uint32_t kGeneratorDeviceIndex = 2;
inline constexpr uint32_t kGeneratorState = 3;
inline constexpr uint32_t kGeneratorTorchVersion = 4;

// enum Phase
enum Phase : int32_t { kPhaseUnspecified = 0, kPhaseForward = 1, kPhaseBackward = 2 };
// enum GeneratorDevice
enum GeneratorDevice : int32_t {
  kGeneratorUnspecified = 0,
  kGeneratorCpu = 1,
  kGeneratorCuda = 2,
  kGeneratorNpu = 3,
  kGeneratorPrivateUse1 = 4,
  kGeneratorOther = 5,
};
// enum DType
enum DType : int32_t {
  kDTypeUnspecified = 0,
  kBool = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kInt16 = 4,
  kInt32 = 5,
  kInt64 = 6,
  kFloat16 = 7,
  kBFloat16 = 8,
  kFloat32 = 9,
  kFloat64 = 10,
  kComplex64 = 11,
  kComplex128 = 12,
};
// enum Layout
enum Layout : int32_t {
  kLayoutStrided = 1,
  kLayoutSparseCoo = 2,
  kLayoutSparseCsr = 3,
  kLayoutMkldnn = 4
};
// enum MemoryFormat
enum MemoryFormat : int32_t {
  kFormatContiguous = 1,
  kFormatPreserve = 2,
  kFormatChannelsLast = 3,
  kFormatChannelsLast3d = 4,
};
// enum DataForm
enum DataForm : int32_t {
  kFormInline = 0,
  kFormStatsOnly = 1,
  kFormChunked = 2,
  kFormUndefined = 3
};
// enum ListKind
enum ListKind : int32_t {
  kListInt = 1,
  kListDouble = 2,
  kListBool = 3,
  kListTensor = 4,
  kListOptionalTensor = 5,
  kListComplex = 6,
  kListString = 7,
  kListGeneric = 8,
  kListTuple = 9,
};

}  // namespace parity::wire
