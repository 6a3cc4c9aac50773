// msprobe's API tables (common/naming/msprobe_tables.h).
#include "common/naming/msprobe_tables.h"

namespace parity::common::internal {

// msprobe's functional APIs (torch.nn.functional, also reached as torch.X or bare names) and the
// aten operators a call of each runs at the top level, the first being the one it usually is;
// composites list the operators they decompose to where those are what the hook sees. Every
// other name maps to the operator of the same name.
const std::map<std::string, OpList, std::less<>>& FunctionalOps() {
  static const auto* table = new std::map<std::string, OpList, std::less<>>{
      {"adaptive_avg_pool1d", {"adaptive_avg_pool1d"}},
      {"adaptive_avg_pool2d", {"adaptive_avg_pool2d", "_adaptive_avg_pool2d"}},
      {"adaptive_avg_pool3d", {"adaptive_avg_pool3d", "_adaptive_avg_pool3d"}},
      {"adaptive_max_pool2d", {"adaptive_max_pool2d"}},
      {"avg_pool1d", {"avg_pool1d"}},
      {"avg_pool2d", {"avg_pool2d"}},
      {"avg_pool3d", {"avg_pool3d"}},
      {"batch_norm", {"batch_norm", "_batch_norm_impl_index", "native_batch_norm"}},
      {"bilinear", {"bilinear"}},
      {"binary_cross_entropy", {"binary_cross_entropy"}},
      {"binary_cross_entropy_with_logits", {"binary_cross_entropy_with_logits"}},
      {"celu", {"celu"}},
      {"conv1d", {"conv1d", "convolution"}},
      {"conv2d", {"conv2d", "convolution"}},
      {"conv3d", {"conv3d", "convolution"}},
      {"conv_transpose1d", {"conv_transpose1d", "convolution"}},
      {"conv_transpose2d", {"conv_transpose2d", "convolution"}},
      {"conv_transpose3d", {"conv_transpose3d", "convolution"}},
      {"cosine_similarity", {"cosine_similarity"}},
      {"cross_entropy",
       {"cross_entropy_loss", "log_softmax", "_log_softmax", "nll_loss", "nll_loss_nd",
        "nll_loss_forward", "nll_loss2d_forward"}},
      {"dropout", {"dropout", "native_dropout"}},
      {"elu", {"elu"}},
      {"embedding", {"embedding"}},
      {"gelu", {"gelu"}},
      {"glu", {"glu"}},
      {"group_norm", {"group_norm", "native_group_norm"}},
      {"hardsigmoid", {"hardsigmoid"}},
      {"hardswish", {"hardswish"}},
      {"hardtanh", {"hardtanh"}},
      {"huber_loss", {"huber_loss"}},
      {"instance_norm", {"instance_norm"}},
      {"interpolate",
       {"upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
        "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d",
        "upsample_linear1d", "upsample_bilinear2d", "upsample_bicubic2d", "upsample_trilinear3d"}},
      {"kl_div", {"kl_div"}},
      {"l1_loss", {"l1_loss"}},
      {"layer_norm", {"layer_norm", "native_layer_norm"}},
      {"leaky_relu", {"leaky_relu"}},
      {"linear", {"linear"}},
      {"log_softmax", {"log_softmax", "_log_softmax"}},
      {"logsigmoid", {"log_sigmoid"}},
      {"max_pool1d", {"max_pool1d", "max_pool1d_with_indices"}},
      {"max_pool2d", {"max_pool2d", "max_pool2d_with_indices"}},
      {"max_pool3d", {"max_pool3d", "max_pool3d_with_indices"}},
      {"mish", {"mish"}},
      {"mse_loss", {"mse_loss"}},
      {"nll_loss", {"nll_loss_nd", "nll_loss", "nll_loss_forward", "nll_loss2d_forward"}},
      {"one_hot", {"one_hot"}},
      {"pad",
       {"pad", "constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d",
        "replication_pad1d", "replication_pad2d", "replication_pad3d"}},
      {"pixel_shuffle", {"pixel_shuffle"}},
      {"relu", {"relu"}},
      {"relu6", {"relu6", "hardtanh"}},
      {"rms_norm", {"rms_norm"}},
      {"scaled_dot_product_attention",
       {"scaled_dot_product_attention", "_scaled_dot_product_attention_math",
        "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention"}},
      {"selu", {"selu"}},
      {"silu", {"silu"}},
      {"smooth_l1_loss", {"smooth_l1_loss"}},
      {"softmax", {"softmax", "_softmax"}},
      {"softplus", {"softplus"}},
      {"unfold", {"im2col"}},
      {"fold", {"col2im"}},
  };
  return *table;
}

// msprobe's Tensor methods whose operator has another name (operators, conversions, indexing).
const std::map<std::string, OpList, std::less<>>& TensorOps() {
  static const auto* table = new std::map<std::string, OpList, std::less<>>{
      {"__add__", {"add"}},
      {"__radd__", {"add"}},
      {"__iadd__", {"add_"}},
      {"__sub__", {"sub"}},
      {"__rsub__", {"rsub"}},
      {"__isub__", {"sub_"}},
      {"__mul__", {"mul"}},
      {"__rmul__", {"mul"}},
      {"__imul__", {"mul_"}},
      {"__truediv__", {"div"}},
      {"__div__", {"div"}},
      {"__rtruediv__", {"reciprocal", "mul"}},
      {"__itruediv__", {"div_"}},
      {"__floordiv__", {"floor_divide"}},
      {"__mod__", {"remainder"}},
      {"__matmul__", {"matmul"}},
      {"__rmatmul__", {"matmul"}},
      {"__pow__", {"pow"}},
      {"__rpow__", {"pow"}},
      {"__neg__", {"neg"}},
      {"__abs__", {"abs"}},
      {"__invert__", {"bitwise_not"}},
      {"__eq__", {"eq"}},
      {"__ne__", {"ne"}},
      {"__lt__", {"lt"}},
      {"__le__", {"le"}},
      {"__gt__", {"gt"}},
      {"__ge__", {"ge"}},
      {"__getitem__", {"index", "slice", "select", "unsqueeze", "alias"}},
      {"__setitem__", {"index_put_", "copy_", "fill_", "masked_fill_"}},
      {"float", {"_to_copy", "to"}},
      {"half", {"_to_copy", "to"}},
      {"bfloat16", {"_to_copy", "to"}},
      {"double", {"_to_copy", "to"}},
      {"int", {"_to_copy", "to"}},
      {"long", {"_to_copy", "to"}},
      {"bool", {"_to_copy", "to"}},
      {"type_as", {"_to_copy", "to"}},
      {"type", {"_to_copy", "to"}},
  };
  return *table;
}

// torch.distributed's APIs and the c10d operators they run.
const std::map<std::string, std::string, std::less<>>& DistributedOps() {
  static const auto* table = new std::map<std::string, std::string, std::less<>>{
      {"all_gather", "allgather_"},
      {"all_gather_into_tensor", "_allgather_base_"},
      {"all_reduce", "allreduce_"},
      {"all_to_all", "alltoall_"},
      {"all_to_all_single", "alltoall_base_"},
      {"barrier", "barrier"},
      {"broadcast", "broadcast_"},
      {"gather", "gather_"},
      {"recv", "recv_"},
      {"reduce", "reduce_"},
      {"reduce_scatter", "reduce_scatter_"},
      {"reduce_scatter_tensor", "_reduce_scatter_base_"},
      {"scatter", "scatter_"},
      {"send", "send"},
  };
  return *table;
}

}  // namespace parity::common::internal
