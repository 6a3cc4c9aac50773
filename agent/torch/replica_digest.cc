#include "agent/torch/replica_digest.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "common/wire/crc32c.h"

namespace parity::agent {
namespace {

// Words per slice: the slice's temporaries (its weights and products, int64) stay at 64 MiB.
constexpr int64_t kSliceWords = int64_t{4} << 20;

bool Empty(const at::Tensor& t) { return !t.defined() || t.numel() == 0; }

}  // namespace

at::Tensor Poly64(const at::Tensor& tensor) {
  const at::TensorOptions longs = at::TensorOptions().dtype(at::kLong).device(tensor.device());
  if (Empty(tensor)) return at::zeros({}, longs);
  at::Tensor bytes = tensor.detach().contiguous().view({-1}).view(at::kByte);
  if (const int64_t rest = bytes.numel() % 4; rest != 0) {
    bytes = at::cat({bytes, at::zeros({4 - rest}, bytes.options())});
  }
  const at::Tensor words = bytes.view(at::kInt);
  at::Tensor sum = at::zeros({}, longs);
  for (int64_t start = 0; start < words.numel(); start += kSliceWords) {
    const int64_t n = std::min(kSliceWords, words.numel() - start);
    const at::Tensor weights = at::arange(start, start + n, longs).mul_(2).add_(1);
    sum.add_(words.narrow(0, start, n).to(at::kLong).mul_(weights).sum());
  }
  return sum;
}

TensorDigests DigestTensors(const std::vector<at::Tensor>& tensors) {
  TensorDigests d;
  const bool host = std::all_of(tensors.begin(), tensors.end(), [](const at::Tensor& t) {
    return !t.defined() || t.device().is_cpu();
  });
  d.algorithm = host ? "crc32c" : "poly64";
  for (const at::Tensor& t : tensors) d.bytes.push_back(Empty(t) ? 0 : t.nbytes());
  if (host) {
    for (const at::Tensor& t : tensors) {
      if (Empty(t)) {
        d.digests.push_back(0);
        continue;
      }
      const at::Tensor c = t.detach().contiguous();
      d.digests.push_back(
          common::Crc32c(std::string_view(static_cast<const char*>(c.data_ptr()), c.nbytes())));
    }
    return d;
  }
  // One transfer per device for the whole report: every digest computed where its tensor is,
  // the digests of a device stacked there and copied to the host together.
  d.digests.assign(tensors.size(), 0);
  std::vector<std::pair<c10::Device, std::vector<std::size_t>>> by_device;
  std::vector<at::Tensor> sums(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (Empty(tensors[i])) continue;
    sums[i] = Poly64(tensors[i]);
    auto it = std::find_if(by_device.begin(), by_device.end(),
                           [&](const auto& e) { return e.first == tensors[i].device(); });
    if (it == by_device.end()) it = by_device.insert(by_device.end(), {tensors[i].device(), {}});
    it->second.push_back(i);
  }
  for (const auto& [device, indices] : by_device) {
    std::vector<at::Tensor> of;
    for (std::size_t i : indices) of.push_back(sums[i]);
    const at::Tensor on_host = at::stack(of).cpu();
    const int64_t* values = on_host.data_ptr<int64_t>();
    for (std::size_t k = 0; k < indices.size(); ++k) {
      d.digests[indices[k]] = static_cast<uint64_t>(values[k]);
    }
  }
  return d;
}

}  // namespace parity::agent
