// Whether a tensor still holds the bits of an earlier copy of it: the one proof the agent's
// shortcuts rest on (docs/design.md: shortcuts are exact or absent). The read-only argument check
// and the snapshot cache both use these; no sampling decides anything.
#pragma once

#include "common/torch/torch_pch.h"

namespace parity::agent {

// Whether host tensor `now` (any strides) holds exactly the bytes of `copy`, a copy of the same
// shape and dtype, contiguous or in `now`'s own layout where `now`'s elements fill their memory
// span (then one memcmp): memcmp over the longest contiguous runs, transposed views in tiles, no
// dispatcher call.
bool SameBits(const at::Tensor& copy, const at::Tensor& now);
// The same, for a view whose innermost dimension is strided, compared one loop a row, as SameBits
// did before it compared transposed views in tiles: for tests/bench/tensor_bits_bench's side by
// side, and the tests (SameBits otherwise).
bool SameBitsByRows(const at::Tensor& copy, const at::Tensor& now);

// Whether two contiguous tensors of one shape and dtype on one device differ in any bit (so -0.0
// differs from 0.0 and NaNs compare by payload), computed by that device on its current stream:
// a 0-dim bool tensor there, ready once the stream reaches it; the caller reads it after its wait
// for the stream. Undefined when the dtype has no integer view of its width (complex128): the
// caller then treats the tensors as different.
at::Tensor DeviceBitsDiffer(const at::Tensor& a, const at::Tensor& b);

}  // namespace parity::agent
