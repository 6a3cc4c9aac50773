"""Faults of torch_npu's fused kernels, planted in the simulated NPU (tests/npu_sim/npu_sim.cc,
PARITY_NPU_SIM_FAULT). Each names the call that must be reported (op, phase, output) and the
ops a report may land on: the faulty kernel's own forward or backward."""
import collections

Fault = collections.namedtuple("Fault", "description op phase output allowed_ops")

_FA = ("npu::npu_fusion_attention", "npu::npu_fusion_attention_grad")

FAULTS = {
    "rms_eps": Fault("npu_rms_norm ignores epsilon (uses 1e-5)",
                     "npu::npu_rms_norm", "forward", 0, ("npu::npu_rms_norm",)),
    "rotary_half": Fault("npu_rotary_mul rotates the wrong half: (x2, -x1)",
                         "npu::npu_rotary_mul", "forward", 0, ("npu::npu_rotary_mul",)),
    "swiglu_swap": Fault("npu_swiglu swaps its halves: silu(b) * a",
                         "npu::npu_swiglu", "forward", 0, ("npu::npu_swiglu",)),
    "fa_scale": Fault("npu_fusion_attention (and its grad) forget the scale",
                      "npu::npu_fusion_attention", "forward", 0, _FA),
    # The forward alone is wrong: its correct grad, handed the wrong forward's softmax statistics
    # and output, is judged on them and must not be blamed (only the forward may be reported).
    "fa_fwd_scale": Fault("npu_fusion_attention's forward forgets the scale; its grad is right",
                          "npu::npu_fusion_attention", "forward", 0,
                          ("npu::npu_fusion_attention",)),
    "fa_sparse": Fault("npu_fusion_attention applies no mask for sparse_mode 2 (causal)",
                       "npu::npu_fusion_attention", "forward", 0, _FA),
    "fa_grad_softmax": Fault("npu_fusion_attention_grad drops the softmax correction "
                             "rowsum(dO * O)", "npu::npu_fusion_attention_grad", "backward", 0,
                             ("npu::npu_fusion_attention_grad",)),
}
