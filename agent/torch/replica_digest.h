// Digests of tensors every rank of a process group must hold alike (docs/replicas.md): what the
// torch half sends in a ReplicaReport. Host tensors: CRC-32C of their bytes (the CPU's
// instruction). Device tensors: "poly64", the sum over the tensor's 32-bit words w_i (zero-padded)
// of w_i * (2i + 1) modulo 2^64, computed on the device by its own kernels, in slices, with one
// copy of the results to the host for the whole report: no tensor is copied to the host. Any
// change of a single word changes poly64 (2i + 1 is odd and a word's change is below 2^32), and
// equal bytes give equal digests on every rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/torch/torch_pch.h"

namespace parity::agent {

struct TensorDigests {
  std::string algorithm;  // "crc32c" when every tensor is on the host, else "poly64" for all
  std::vector<uint64_t> digests;
  std::vector<uint64_t> bytes;
};

// Undefined tensors digest as empty. May throw c10::Error (a device error).
TensorDigests DigestTensors(const std::vector<at::Tensor>& tensors);

// poly64 of one tensor, on its own device (a 0-dim int64 tensor there).
at::Tensor Poly64(const at::Tensor& tensor);

}  // namespace parity::agent
