// What the agent's hook decides about a call from its inputs alone, before copying anything:
// whether the call computes at all (Traced), and how many of its arguments go (SentArguments).
#pragma once

#include <cstddef>

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

}  // namespace parity::agent
