#include "server/replay/call_values.h"

#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

// What torch.save writes (torch::jit::pickle_save's archive), written straight into the file.
// Not pickle_save itself: it builds the archive in memory, and when that memory runs out part
// way its archive writer's destructor writes the archive's end into the same failing buffer,
// from a destructor, and the server aborts (terminate: "unexpected pos"). Here the writer never
// throws and never writes short: a failed write(2) is remembered and reported after, so every
// failure is an error of this one file.
absl::Status WriteFile(const std::string& path, const c10::IValue& value) {
  std::vector<char> pickle;
  std::vector<at::Tensor> tensors;
  try {
    torch::jit::Pickler pickler(
        [&pickle](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); });
    pickler.protocol();
    pickler.pushIValue(ForFile(value));
    pickler.stop();
    tensors = pickler.tensorData();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(path, ": cannot serialize: ", ErrorText(e)));
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat(path, ": cannot create: ", std::strerror(errno)));
  }
  int write_errno = 0;
  auto write_all = [fd, &write_errno](const void* data, size_t n) -> size_t {
    const char* p = static_cast<const char*>(data);
    for (size_t left = n; write_errno == 0 && left > 0;) {
      const ssize_t w = ::write(fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        write_errno = w < 0 ? errno : EIO;
        break;
      }
      p += w;
      left -= static_cast<size_t>(w);
    }
    return n;  // never short: the archive's bookkeeping stays whole, the failure is reported
  };
  std::string failure;
  try {
    caffe2::serialize::PyTorchStreamWriter writer(write_all);
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), tensors, writer);
    writer.writeEndOfFile();
  } catch (const std::exception& e) {
    failure = absl::StrCat(path, ": cannot serialize: ", ErrorText(e));
  }
  if (::close(fd) != 0 && write_errno == 0) write_errno = errno;
  if (failure.empty() && write_errno != 0) {
    failure = absl::StrCat(path, ": cannot write: ", std::strerror(write_errno));
  }
  if (!failure.empty()) {
    ::unlink(path.c_str());
    return absl::InternalError(failure);
  }
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
