#include "agent/torch/input_writes.h"

#include <ATen/core/function_schema.h>

#include <atomic>
#include <cstring>
#include <string_view>

#include "agent/torch/snapshot_cache.h"
#include "common/wire/fields.h"
#include "parity/transport.h"

namespace parity::agent {
namespace {

// Arguments torch's own kernels update although their schema does not say so: the batch-norm
// family's running statistics (aten::batch_norm, native_batch_norm, instance_norm, ... take
// `Tensor? running_mean`), and rrelu_with_noise's noise, which it fills in training.
bool UpdatedWithoutAnnotation(std::string_view op, std::string_view arg) {
  return arg == "running_mean" || arg == "running_var" ||
         (arg == "noise" && op.find("rrelu_with_noise") != std::string_view::npos);
}

bool Writes(const c10::Argument& a) {
  return a.alias_info() != nullptr && a.alias_info()->isWrite();
}

// The storages of every tensor the call may write.
std::vector<c10::Storage> WrittenStorages(const c10::FunctionSchema& schema,
                                          c10::ArrayRef<const c10::IValue> inputs) {
  std::vector<c10::Storage> out;
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size() && i < inputs.size(); ++i) {
    if (!Writes(args[i])) continue;
    const c10::IValue& v = inputs[i];
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().has_storage()) {
      out.push_back(v.toTensor().storage());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) {
        if (t.defined() && t.has_storage()) out.push_back(t.storage());
      }
    }
  }
  return out;
}

// Elements of `now` that differ from `before` (same shape and dtype): NaN where both are NaN is
// unchanged. A scalar tensor on their device.
at::Tensor CountChanged(const at::Tensor& before, const at::Tensor& now) {
  at::Tensor changed = at::ne(before, now);
  if (at::isFloatingType(now.scalar_type()) || at::isComplexType(now.scalar_type())) {
    changed = at::logical_and(changed,
                              at::logical_not(at::logical_and(at::isnan(before), at::isnan(now))));
  }
  return changed.sum();
}

// Whether `now` (any strides, on the host) holds the same bytes as `before`, its contiguous copy:
// memcmp over the longest contiguous runs, without a dispatcher call (a transposed weight, a
// sliced activation: most arguments of an LLM's matmuls are not contiguous).
bool SameBits(const at::Tensor& before, const at::Tensor& now) {
  const auto sizes = now.sizes();
  const auto strides = now.strides();
  const std::size_t element = now.element_size();
  int k = static_cast<int>(sizes.size()) - 1;
  int64_t run = 1;  // elements in one contiguous innermost run
  for (; k >= 0 && (strides[k] == run || sizes[k] == 1); --k) run *= sizes[k];
  const auto* b = static_cast<const char*>(before.data_ptr());
  const auto* base = static_cast<const char*>(now.data_ptr());
  const std::size_t run_bytes = static_cast<std::size_t>(run) * element;
  std::vector<int64_t> index(static_cast<std::size_t>(k + 1), 0);  // over dims 0..k
  for (;;) {
    int64_t offset = 0;
    for (int d = 0; d <= k; ++d) offset += index[d] * strides[d];
    if (std::memcmp(b, base + offset * static_cast<int64_t>(element), run_bytes) != 0) return false;
    b += run_bytes;
    int d = k;
    for (; d >= 0 && ++index[d] == sizes[d]; --d) index[d] = 0;
    if (d < 0) return true;
  }
}

void LogOnce(const std::string& what) {
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) {
    const std::string line = "the read-only argument check skips what it cannot compare: " + what;
    parity_log(PARITY_LOG_WARNING, line.c_str());
  }
}

}  // namespace

std::vector<WatchedInput> WatchReadOnlyInputs(const c10::FunctionSchema& schema,
                                              c10::ArrayRef<const c10::IValue> inputs,
                                              std::size_t sent) {
  std::vector<WatchedInput> watched;
  const auto& args = schema.arguments();
  std::vector<c10::Storage> written;
  bool written_known = false;
  for (std::size_t i = 0; i < sent && i < args.size() && i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    if (!v.isTensor() || Writes(args[i])) continue;
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || t.numel() == 0 || !t.has_storage() || t.is_sparse() || t.is_quantized()) {
      continue;
    }
    if (UpdatedWithoutAnnotation(schema.name(), args[i].name())) continue;
    if (!written_known) {
      written = WrittenStorages(schema, inputs);
      written_known = true;
    }
    bool shares = false;
    for (const c10::Storage& s : written) shares = shares || t.storage().is_alias_of(s);
    if (shares) continue;
    watched.push_back({static_cast<uint32_t>(i), args[i].name(), t});
  }
  return watched;
}

void CompareWatchedInputs(const std::vector<WatchedInput>& watched, TorchValues& values) {
  for (const WatchedInput& w : watched) {
    if (w.index >= values.inputs.size() || !values.inputs[w.index].isTensor()) continue;
    const at::Tensor& before = values.inputs[w.index].toTensor();
    const at::Tensor& now = w.live;
    if (!before.defined() || before.sizes() != now.sizes() ||
        before.scalar_type() != now.scalar_type() || before.device() != now.device()) {
      continue;
    }
    TorchValues::InputWrite write{w.index, w.name, now.numel(), 0, {}};
    try {
      if (now.device().is_cpu()) {
        // The usual case costs memcmp; elements are counted only when something changed.
        if (before.is_contiguous() && SameBits(before, now)) continue;
        ForgetSnapshotsOf(now);  // written behind its schema: no earlier snapshot holds
        write.changed = CountChanged(before, now.detach()).item<int64_t>();
        if (write.changed == 0) continue;
      } else {
        // An accelerator: a second copy, queued on the training's stream after the kernel, as
        // the snapshot was before it; the sender compares the two on the host. A copy is the one
        // kernel every device has (comparisons may not be: the test NPU's fallback has none).
        write.after = now.detach().clone(at::MemoryFormat::Contiguous);
        // Whether or not the kernel wrote it (the sender compares later), this copy is the
        // tensor as it is now: the snapshot the next call that reads it gets.
        RememberSnapshot(now.detach(), write.after);
        values.bytes += static_cast<uint64_t>(now.numel()) * now.element_size();
      }
    } catch (const std::exception& e) {
      LogOnce(values.op + " " + w.name + ": " + e.what());
      continue;
    }
    values.input_writes.push_back(std::move(write));
  }
}

void ResolveInputWrites(TorchValues& values) {
  for (TorchValues::InputWrite& w : values.input_writes) {
    if (!w.after.defined()) continue;
    try {
      const at::Tensor after = HostCopyOf(w.after);  // kept for the calls that read it next
      const c10::IValue& snapshot = values.inputs[w.index];
      w.changed = 0;
      if (snapshot.isTensor()) {
        const at::Tensor before = snapshot.toTensor().to(at::kCPU);
        const std::size_t bytes = static_cast<std::size_t>(after.numel()) * after.element_size();
        if (std::memcmp(before.data_ptr(), after.data_ptr(), bytes) != 0) {
          w.changed = CountChanged(before, after).item<int64_t>();
        }
      }
    } catch (const std::exception& e) {
      LogOnce(values.op + " " + w.name + ": " + e.what());
      w.changed = 0;
    }
    w.after = at::Tensor();
  }
}

void EncodeInputWrites(const TorchValues& values, wire::Message* fields) {
  for (const TorchValues::InputWrite& w : values.input_writes) {
    if (w.changed <= 0) continue;
    wire::Message& m = fields->Sub(wire::kApiCallInputsWritten);
    m.Varint(wire::kInputWrittenIndex, w.index);
    m.Bytes(wire::kInputWrittenName, w.name);
    m.Varint(wire::kInputWrittenChangedElements, static_cast<uint64_t>(w.changed));
    m.Varint(wire::kInputWrittenElements, static_cast<uint64_t>(w.elements));
  }
}

}  // namespace parity::agent
