// Registers torch_npu's fused operators (schemas from torch_npu_schemas.json, embedded at build
// time) and their aten-composed reference kernels. The kernels are CompositeExplicitAutograd:
// one kernel for every backend, so the server's generic replay (findSchema + boxed call) runs
// them on the CPU or a CUDA bench and in float64 for the golden, with no special case.
#include <torch/library.h>

#include "oplib/npu/kernels.h"
#include "oplib/support/schema_data.h"

extern const char kParityTorchNpuSchemasJson[];

namespace parity::oplib::npu {
namespace {

TORCH_LIBRARY_FRAGMENT(npu, m) { DefineSchemas(m, ParseSchemaData(kParityTorchNpuSchemasJson)); }

TORCH_LIBRARY_IMPL(npu, CompositeExplicitAutograd, m) {
  m.impl("npu_fusion_attention", Boxed<&FusionAttention>());
  m.impl("npu_fusion_attention_grad", Boxed<&FusionAttentionGrad>());
  m.impl("npu_rms_norm", Boxed<&RmsNorm>());
  m.impl("npu_rms_norm_backward", Boxed<&RmsNormBackward>());
  m.impl("npu_rotary_mul", Boxed<&RotaryMul>());
  m.impl("npu_rotary_mul_backward", Boxed<&RotaryMulBackward>());
  m.impl("npu_swiglu", Boxed<&Swiglu>());
  m.impl("npu_swiglu_backward", Boxed<&SwigluBackward>());
  m.impl("npu_scaled_masked_softmax", Boxed<&ScaledMaskedSoftmax>());
  m.impl("npu_scaled_masked_softmax_backward", Boxed<&ScaledMaskedSoftmaxBackward>());
  m.impl("npu_fast_gelu", Boxed<&FastGelu>());
  m.impl("npu_fast_gelu_backward", Boxed<&FastGeluBackward>());
  m.impl("fast_gelu", Boxed<&FastGelu>());
  m.impl("npu_confusion_transpose", Boxed<&ConfusionTranspose>());
  m.impl("npu_confusion_transpose_backward", Boxed<&ConfusionTransposeBackward>());
  m.impl("npu_linear", Boxed<&Linear>());
  m.impl("npu_linear_backward", Boxed<&LinearBackward>());
  m.impl("npu_layer_norm_eval", Boxed<&LayerNormEval>());
  m.impl("npu_group_norm_silu", Boxed<&GroupNormSilu>());
  m.impl("npu_mish", Boxed<&Mish>());
  m.impl("npu_mish_backward", Boxed<&MishBackward>());
  m.impl("npu_moe_gating_top_k_softmax", Boxed<&MoeGatingTopKSoftmax>());
  m.impl("npu_sort_v2", Boxed<&SortV2>());
  m.impl("npu_sort_v2.out", Boxed<&SortV2Out>());
  m.impl("npu_apply_adam", Boxed<&ApplyAdam>());
  m.impl("npu_apply_adam.out", Boxed<&ApplyAdamOut>());
  m.impl("npu_apply_adam_w", Boxed<&ApplyAdamW>());
  m.impl("npu_apply_adam_w.out", Boxed<&ApplyAdamWOut>());
  m.impl("matmul_backward", Boxed<&MatmulBackward>());
  m.impl("npu_grouped_matmul", Boxed<&GroupedMatmul>());
  m.impl("npu_grouped_matmul.List", Boxed<&GroupedMatmulList>());
  m.impl("npu_grouped_matmul.release_7_0", Boxed<&GroupedMatmulRelease70>());
  m.impl("npu_grouped_matmul.release_6_0", Boxed<&GroupedMatmulRelease60>());
  m.impl("npu_moe_init_routing", Boxed<&MoeInitRouting>());
  m.impl("npu_moe_compute_expert_tokens", Boxed<&MoeComputeExpertTokens>());
  m.impl("npu_moe_finalize_routing", Boxed<&MoeFinalizeRouting>());
  m.impl("npu_moe_token_permute", Boxed<&MoeTokenPermute>());
  m.impl("npu_moe_token_unpermute", Boxed<&MoeTokenUnpermute>());
  m.impl("npu_moe_token_permute_grad", Boxed<&MoeTokenPermuteGrad>());
  m.impl("npu_moe_token_unpermute_grad", Boxed<&MoeTokenUnpermuteGrad>());
  m.impl("_npu_moe_token_unpermute", Boxed<&MoeTokenUnpermuteSaving>());
  m.impl("npu_moe_token_permute_grad_v2", Boxed<&MoeTokenPermuteGradV2>());
  m.impl("npu_moe_token_unpermute_grad_v2", Boxed<&MoeTokenUnpermuteGradV2>());
}

// aten::matmul_backward exists from libtorch 1.13 with nested-tensor kernels only; torch_npu
// builds that record it for dense tensors replay through this one.
TORCH_LIBRARY_IMPL(aten, CompositeExplicitAutograd, m) {
  m.impl("matmul_backward", Boxed<&MatmulBackward>());
}

}  // namespace
}  // namespace parity::oplib::npu
