#include "server/replay/call_values.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/torch/ivalue_walk.h"
#include "common/torch/torch_pch.h"
#include "server/replay/stages.h"

namespace parity::server {
namespace {

// Host copies; undefined tensors (absent gradients) become None, which pickle can write.
c10::IValue ForFile(const c10::IValue& v) {
  return common::MapLeaves(v, [](const c10::IValue& leaf) {
    if (!leaf.isTensor()) return leaf;
    const at::Tensor& t = leaf.toTensor();
    if (!t.defined()) return c10::IValue();
    return c10::IValue(t.device().is_cpu() ? t : t.to(at::kCPU));
  });
}

absl::Status WriteFile(const std::string& path, const c10::IValue& value) {
  std::vector<char> bytes;
  try {
    bytes = torch::jit::pickle_save(ForFile(value));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(path, ": cannot serialize: ", ErrorText(e)));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

absl::Status WriteAll(const std::vector<c10::IValue>& values, const std::string& dir,
                      const std::string& stem, std::vector<std::string>* names) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::string name = absl::StrCat(stem, ".", i, ".pt");
    if (absl::Status s = WriteFile(absl::StrCat(dir, "/", name), values[i]); !s.ok()) return s;
    names->push_back(std::move(name));
  }
  return absl::OkStatus();
}

}  // namespace

const std::string& SchemaOf(const CallValues& values) { return values.schema; }

uint64_t SavedBytes(const CallValues& values) {
  uint64_t bytes = 0;
  for (const auto* stack : {&values.inputs, &values.device, &values.bench, &values.golden}) {
    for (const c10::IValue& v : *stack) {
      bytes += 1024;  // the archive's own records
      common::ForEachLeaf(v, [&](const c10::IValue& leaf) {
        if (leaf.isTensor() && leaf.toTensor().defined()) bytes += leaf.toTensor().nbytes();
      });
    }
  }
  return bytes;
}

absl::StatusOr<SavedFiles> SaveCallValues(const CallValues& values, const std::string& dir,
                                          const std::string& prefix) {
  SavedFiles files;
  absl::Status s = WriteAll(values.inputs, dir, absl::StrCat(prefix, ".input"), &files.inputs);
  if (s.ok())
    s = WriteAll(values.device, dir, absl::StrCat(prefix, ".output.device"), &files.device);
  if (s.ok()) s = WriteAll(values.bench, dir, absl::StrCat(prefix, ".output.bench"), &files.bench);
  if (s.ok())
    s = WriteAll(values.golden, dir, absl::StrCat(prefix, ".output.golden"), &files.golden);
  if (!s.ok()) return s;
  return files;
}

absl::StatusOr<c10::IValue> LoadValue(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  try {
    return torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a file torch.save or Parity wrote: ", ErrorText(e)));
  }
}

}  // namespace parity::server
