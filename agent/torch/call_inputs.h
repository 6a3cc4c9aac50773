// What the agent's hook decides about a call from its inputs alone, before copying anything:
// whether the call computes at all (Traced), how many of its arguments go (SentArguments), its
// device and generator, its signature, and whether it communicates.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <ATen/core/function_schema.h>

#include "common/torch/torch_pch.h"

namespace parity::agent {

// A call on tensors without data of their own computes nothing: torch.compile tracing the
// program with fake tensors (its kernels run later, compiled), meta tensors, functionalization;
// nor does one made while a Python dispatch mode, functorch's transforms or functionalization are
// active (the agent's own copies would dispatch into them). Such calls are not captured.
bool Traced(c10::ArrayRef<const c10::IValue> inputs);

// How many of the call's arguments are sent: trailing ones equal to their schema's default are
// left out (the server appends its own schema's defaults).
std::size_t SentArguments(const c10::FunctionSchema& schema,
                          c10::ArrayRef<const c10::IValue> inputs);

// The device type of the call's first defined tensor; CPU when it has none.
c10::DeviceType DeviceTypeOf(c10::ArrayRef<const c10::IValue> inputs);

// The generator a random op is about to draw from: its explicit `generator` argument, else the
// default generator of its device.
std::optional<at::Generator> GeneratorOf(c10::ArrayRef<const c10::IValue> inputs);

// op, overload, dtype and shape of each tensor argument: what the per-signature budget counts,
// written into `out` (its buffer reused).
void Signature(const std::string& op, const std::string& overload,
               c10::ArrayRef<const c10::IValue> inputs, std::string* out);

// Whether an op's schema takes a communicator (torch_npu's communication-fused ops).
bool Communicates(const std::string& op, const std::string& overload);

}  // namespace parity::agent
