// Precompiled header shared by the few translation units that include libtorch.
// Only ATen/c10 headers: <torch/torch.h> costs ~15 s per translation unit, these ~4 s.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>
