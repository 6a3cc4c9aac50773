// The reference kernels of torch_npu's fused operators: each composed of aten operators, so one
// kernel serves every backend (CPU, CUDA) and every precision the server replays in (the bench
// at the call's dtypes, the golden in float64). Where the NPU kernel computes a low-precision
// input in float32 (norms, softmax, attention), the reference does the same and rounds once at
// the end, as the NPU does.
#pragma once

#include "oplib/support/boxed_kernel.h"

namespace parity::oplib::npu {

// float32 for float16/bfloat16, the tensor's own type otherwise.
at::ScalarType ComputeType(const at::Tensor& t);
at::Tensor Upcast(const at::Tensor& t);
// float32 unless the computation is in float64 (the golden): the dtype of statistics outputs
// (rstd, softmax max and sum) that the NPU returns in float32.
at::ScalarType StatsType(const at::Tensor& computed);

// norm.cc
Stack RmsNorm(const Args& a);
Stack RmsNormBackward(const Args& a);
Stack LayerNormEval(const Args& a);
Stack GroupNormSilu(const Args& a);

// activation.cc
Stack RotaryMul(const Args& a);
Stack RotaryMulBackward(const Args& a);
Stack Swiglu(const Args& a);
Stack SwigluBackward(const Args& a);
Stack FastGelu(const Args& a);
Stack FastGeluBackward(const Args& a);
Stack Mish(const Args& a);
Stack MishBackward(const Args& a);
Stack ScaledMaskedSoftmax(const Args& a);
Stack ScaledMaskedSoftmaxBackward(const Args& a);

// attention.cc
Stack FusionAttention(const Args& a);
Stack FusionAttentionGrad(const Args& a);

// linear.cc
Stack ConfusionTranspose(const Args& a);
Stack ConfusionTransposeBackward(const Args& a);
Stack Linear(const Args& a);
Stack LinearBackward(const Args& a);
Stack MatmulBackward(const Args& a);
Stack MoeGatingTopKSoftmax(const Args& a);
Stack SortV2(const Args& a);
Stack SortV2Out(const Args& a);

// moe.cc
Stack GroupedMatmul(const Args& a);
Stack GroupedMatmulList(const Args& a);
Stack GroupedMatmulRelease70(const Args& a);
Stack GroupedMatmulRelease60(const Args& a);
Stack MoeInitRouting(const Args& a);
Stack MoeComputeExpertTokens(const Args& a);
Stack MoeFinalizeRouting(const Args& a);
Stack MoeTokenPermute(const Args& a);
Stack MoeTokenUnpermute(const Args& a);
Stack MoeTokenUnpermuteSaving(const Args& a);
Stack MoeTokenPermuteGrad(const Args& a);
Stack MoeTokenPermuteGradV2(const Args& a);
Stack MoeTokenUnpermuteGrad(const Args& a);
Stack MoeTokenUnpermuteGradV2(const Args& a);

// optimizer.cc
Stack ApplyAdam(const Args& a);
Stack ApplyAdamOut(const Args& a);
Stack ApplyAdamW(const Args& a);
Stack ApplyAdamWOut(const Args& a);

}  // namespace parity::oplib::npu
