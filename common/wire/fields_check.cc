// common/wire/fields.h checked against the generated code: a field renumbered in parity.proto,
// or an enum value changed, fails the build here.
#include "common/wire/fields.h"

#include "parity/v1/parity.pb.h"

namespace parity::wire {
namespace {

#define PARITY_SAME(ours, theirs) \
  static_assert(static_cast<int>(ours) == static_cast<int>(theirs), #ours)

PARITY_SAME(kAgentMessageCall, v1::AgentMessage::kCallFieldNumber);
PARITY_SAME(kPhaseUnspecified, v1::PHASE_UNSPECIFIED);
PARITY_SAME(kPhaseForward, v1::PHASE_FORWARD);
PARITY_SAME(kPhaseBackward, v1::PHASE_BACKWARD);
PARITY_SAME(kGeneratorUnspecified, v1::GENERATOR_DEVICE_UNSPECIFIED);
PARITY_SAME(kGeneratorCpu, v1::GENERATOR_DEVICE_CPU);
PARITY_SAME(kGeneratorCuda, v1::GENERATOR_DEVICE_CUDA);
PARITY_SAME(kGeneratorNpu, v1::GENERATOR_DEVICE_NPU);
PARITY_SAME(kGeneratorPrivateUse1, v1::GENERATOR_DEVICE_PRIVATEUSE1);
PARITY_SAME(kGeneratorOther, v1::GENERATOR_DEVICE_OTHER);
PARITY_SAME(kApiCallInputs, v1::ApiCall::kInputsFieldNumber);
PARITY_SAME(kApiCallOutputs, v1::ApiCall::kOutputsFieldNumber);
PARITY_SAME(kApiCallKeptBlobIds, v1::ApiCall::kKeptBlobIdsFieldNumber);
PARITY_SAME(kApiCallInputsWritten, v1::ApiCall::kInputsWrittenFieldNumber);
PARITY_SAME(kApiCallUncheckedWrites, v1::ApiCall::kUncheckedWritesFieldNumber);
PARITY_SAME(kInputWrittenIndex, v1::InputWritten::kIndexFieldNumber);
PARITY_SAME(kInputWrittenName, v1::InputWritten::kNameFieldNumber);
PARITY_SAME(kInputWrittenChangedElements, v1::InputWritten::kChangedElementsFieldNumber);
PARITY_SAME(kInputWrittenElements, v1::InputWritten::kElementsFieldNumber);
PARITY_SAME(kValueTensor, v1::Value::kTensorFieldNumber);
PARITY_SAME(kValueInt, v1::Value::kIntValueFieldNumber);
PARITY_SAME(kValueDouble, v1::Value::kDoubleValueFieldNumber);
PARITY_SAME(kValueBool, v1::Value::kBoolValueFieldNumber);
PARITY_SAME(kValueString, v1::Value::kStringValueFieldNumber);
PARITY_SAME(kValueNone, v1::Value::kNoneFieldNumber);
PARITY_SAME(kValueList, v1::Value::kListFieldNumber);
PARITY_SAME(kValueDevice, v1::Value::kDeviceFieldNumber);
PARITY_SAME(kValueDType, v1::Value::kDtypeFieldNumber);
PARITY_SAME(kValueLayout, v1::Value::kLayoutFieldNumber);
PARITY_SAME(kValueMemoryFormat, v1::Value::kMemoryFormatFieldNumber);
PARITY_SAME(kValueComplex, v1::Value::kComplexValueFieldNumber);
PARITY_SAME(kListKind, v1::ValueList::kKindFieldNumber);
PARITY_SAME(kListItems, v1::ValueList::kItemsFieldNumber);
PARITY_SAME(kTensorDType, v1::Tensor::kDtypeFieldNumber);
PARITY_SAME(kTensorShape, v1::Tensor::kShapeFieldNumber);
PARITY_SAME(kTensorForm, v1::Tensor::kFormFieldNumber);
PARITY_SAME(kTensorData, v1::Tensor::kDataFieldNumber);
PARITY_SAME(kTensorBlobId, v1::Tensor::kBlobIdFieldNumber);
PARITY_SAME(kTensorStats, v1::Tensor::kStatsFieldNumber);
PARITY_SAME(kTensorCrc32c, v1::Tensor::kCrc32CFieldNumber);
PARITY_SAME(kTensorDevice, v1::Tensor::kDeviceFieldNumber);
PARITY_SAME(kTensorOriginalStrides, v1::Tensor::kOriginalStridesFieldNumber);
PARITY_SAME(kTensorRequiresGrad, v1::Tensor::kRequiresGradFieldNumber);
PARITY_SAME(kStatsMin, v1::TensorStats::kMinFieldNumber);
PARITY_SAME(kStatsMax, v1::TensorStats::kMaxFieldNumber);
PARITY_SAME(kStatsMean, v1::TensorStats::kMeanFieldNumber);
PARITY_SAME(kStatsL2Norm, v1::TensorStats::kL2NormFieldNumber);
PARITY_SAME(kStatsNanCount, v1::TensorStats::kNanCountFieldNumber);
PARITY_SAME(kStatsInfCount, v1::TensorStats::kInfCountFieldNumber);
PARITY_SAME(kDeviceType, v1::Device::kTypeFieldNumber);
PARITY_SAME(kDeviceIndex, v1::Device::kIndexFieldNumber);
PARITY_SAME(kComplexReal, v1::Complex::kRealFieldNumber);
PARITY_SAME(kComplexImag, v1::Complex::kImagFieldNumber);
PARITY_SAME(kGeneratorDeviceType, v1::GeneratorState::kDeviceTypeFieldNumber);
PARITY_SAME(kGeneratorDeviceIndex, v1::GeneratorState::kDeviceIndexFieldNumber);
PARITY_SAME(kGeneratorState, v1::GeneratorState::kStateFieldNumber);
PARITY_SAME(kGeneratorTorchVersion, v1::GeneratorState::kTorchVersionFieldNumber);

PARITY_SAME(kBool, v1::DTYPE_BOOL);
PARITY_SAME(kUInt8, v1::DTYPE_UINT8);
PARITY_SAME(kInt8, v1::DTYPE_INT8);
PARITY_SAME(kInt16, v1::DTYPE_INT16);
PARITY_SAME(kInt32, v1::DTYPE_INT32);
PARITY_SAME(kInt64, v1::DTYPE_INT64);
PARITY_SAME(kFloat16, v1::DTYPE_FLOAT16);
PARITY_SAME(kBFloat16, v1::DTYPE_BFLOAT16);
PARITY_SAME(kFloat32, v1::DTYPE_FLOAT32);
PARITY_SAME(kFloat64, v1::DTYPE_FLOAT64);
PARITY_SAME(kComplex64, v1::DTYPE_COMPLEX64);
PARITY_SAME(kComplex128, v1::DTYPE_COMPLEX128);
PARITY_SAME(kLayoutStrided, v1::LAYOUT_STRIDED);
PARITY_SAME(kLayoutSparseCoo, v1::LAYOUT_SPARSE_COO);
PARITY_SAME(kLayoutSparseCsr, v1::LAYOUT_SPARSE_CSR);
PARITY_SAME(kLayoutMkldnn, v1::LAYOUT_MKLDNN);
PARITY_SAME(kFormatContiguous, v1::MEMORY_FORMAT_CONTIGUOUS);
PARITY_SAME(kFormatPreserve, v1::MEMORY_FORMAT_PRESERVE);
PARITY_SAME(kFormatChannelsLast, v1::MEMORY_FORMAT_CHANNELS_LAST);
PARITY_SAME(kFormatChannelsLast3d, v1::MEMORY_FORMAT_CHANNELS_LAST_3D);
PARITY_SAME(kFormInline, v1::DATA_FORM_INLINE);
PARITY_SAME(kFormStatsOnly, v1::DATA_FORM_STATS_ONLY);
PARITY_SAME(kFormChunked, v1::DATA_FORM_CHUNKED);
PARITY_SAME(kFormUndefined, v1::DATA_FORM_UNDEFINED);
PARITY_SAME(kListInt, v1::LIST_KIND_INT);
PARITY_SAME(kListDouble, v1::LIST_KIND_DOUBLE);
PARITY_SAME(kListBool, v1::LIST_KIND_BOOL);
PARITY_SAME(kListTensor, v1::LIST_KIND_TENSOR);
PARITY_SAME(kListOptionalTensor, v1::LIST_KIND_OPTIONAL_TENSOR);
PARITY_SAME(kListComplex, v1::LIST_KIND_COMPLEX);
PARITY_SAME(kListString, v1::LIST_KIND_STRING);
PARITY_SAME(kListGeneric, v1::LIST_KIND_GENERIC);
PARITY_SAME(kListTuple, v1::LIST_KIND_TUPLE);

#undef PARITY_SAME

}  // namespace
}  // namespace parity::wire
