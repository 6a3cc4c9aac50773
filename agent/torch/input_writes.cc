#include "agent/torch/input_writes.h"

#include <ATen/core/function_schema.h>

#include <atomic>
#include <cstring>
#include <string_view>

#include "agent/torch/snapshot_cache.h"
#include "agent/torch/tensor_bits.h"
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
// unchanged; elements where `inside` (a host bool of the same shape, around a view) is true are
// not counted. A scalar tensor on their device.
at::Tensor CountChanged(const at::Tensor& before, const at::Tensor& now,
                        const at::Tensor& inside = {}) {
  at::Tensor changed = at::ne(before, now);
  if (at::isFloatingType(now.scalar_type()) || at::isComplexType(now.scalar_type())) {
    changed = at::logical_and(changed,
                              at::logical_not(at::logical_and(at::isnan(before), at::isnan(now))));
  }
  if (inside.defined())
    changed = at::logical_and(changed, at::logical_not(inside.to(now.device())));
  return changed.sum();
}

void LogOnce(const std::string& what) {
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true)) {
    const std::string line = "the read-only argument check skips what it cannot compare: " + what;
    parity_log(PARITY_LOG_WARNING, line.c_str());
  }
}

bool Comparable(const at::Tensor& t) {
  return t.defined() && t.numel() > 0 && t.has_storage() && !t.is_sparse() && !t.is_quantized() &&
         t.layout() == at::kStrided;
}

std::string Mib(uint64_t bytes) {
  return std::to_string((bytes + (uint64_t{1} << 19)) >> 20) + " MiB";
}

// The storage around written view `t`, to compare at exit outside the view's own elements: all
// of it when it fits in kViewCheckBytes, else the view's span and kViewMarginBytes either side.
// Nothing when `t` covers its storage (or writes overlapping elements: an expanded view); a note
// in `unchecked` when even the span is over the budget.
void WatchAroundView(uint32_t index, const std::string& name, const at::Tensor& t,
                     std::vector<WatchedInput>* watched, std::vector<std::string>* unchecked) {
  if (!Comparable(t)) return;
  const int64_t item = static_cast<int64_t>(t.element_size());
  const int64_t storage_elements = static_cast<int64_t>(t.storage().nbytes()) / item;
  if (t.numel() >= storage_elements) return;  // the whole storage: nothing outside it
  int64_t lo = t.storage_offset(), hi = t.storage_offset() + 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1 && t.stride(d) <= 0) return;  // expanded or negative: not a plain view
    hi += (t.size(d) - 1) * t.stride(d);
  }
  int64_t start = 0, end = storage_elements;
  if (static_cast<uint64_t>(storage_elements * item) > kViewCheckBytes) {
    const int64_t margin = static_cast<int64_t>(kViewMarginBytes) / item;
    start = std::max<int64_t>(0, lo - margin);
    end = std::min(storage_elements, hi + margin);
    if (static_cast<uint64_t>((end - start) * item) > kViewCheckBytes) {
      unchecked->push_back(name + ": " + Mib(static_cast<uint64_t>((end - start) * item)) +
                           " of storage around the view it may write, over the " +
                           Mib(kViewCheckBytes) + " a call's view check compares");
      return;
    }
  }
  WatchedInput w;
  w.index = index;
  w.name = name + " (outside its view)";
  w.live = t.detach().as_strided({end - start}, {1}, start);
  w.inside = at::zeros({end - start}, at::kBool);
  w.inside.as_strided(t.sizes(), t.strides(), lo - start).fill_(true);
  w.elements = (end - start) - w.inside.sum().item<int64_t>();
  if (w.elements <= 0) return;
  w.before = w.live.clone();  // at entry: on a device, a copy queued on its stream
  watched->push_back(std::move(w));
}

}  // namespace

void WatchReadOnlyInputs(const c10::FunctionSchema& schema, c10::ArrayRef<const c10::IValue> inputs,
                         std::size_t sent, std::vector<WatchedInput>* out,
                         std::vector<std::string>* unchecked) {
  std::vector<WatchedInput>& watched = *out;
  watched.clear();
  const auto& args = schema.arguments();
  std::vector<c10::Storage> written;
  bool written_known = false;
  auto shares_written = [&](const at::Tensor& t) {
    if (!written_known) {
      written = WrittenStorages(schema, inputs);
      written_known = true;
    }
    bool shares = false;
    for (const c10::Storage& s : written) shares = shares || t.storage().is_alias_of(s);
    return shares;
  };
  for (std::size_t i = 0; i < args.size() && i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    const auto index = static_cast<uint32_t>(i);
    if (Writes(args[i])) {
      if (v.isTensor()) WatchAroundView(index, args[i].name(), v.toTensor(), &watched, unchecked);
      continue;
    }
    if (i >= sent || UpdatedWithoutAnnotation(schema.name(), args[i].name())) continue;
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!Comparable(t) || shares_written(t)) continue;
      watched.push_back({index, args[i].name(), t, -1, t.numel(), {}, {}});
    } else if (v.isTensorList()) {  // each member, the argument's elements all of theirs
      const std::vector<at::Tensor> members = v.toTensorList().vec();
      const std::size_t first = watched.size();
      int64_t elements = 0;
      for (std::size_t k = 0; k < members.size(); ++k) {
        const at::Tensor& t = members[k];
        if (!Comparable(t) || shares_written(t)) continue;
        watched.push_back({index, args[i].name(), t, static_cast<int64_t>(k), 0, {}, {}});
        elements += t.numel();
      }
      for (std::size_t k = first; k < watched.size(); ++k) watched[k].elements = elements;
    }
  }
}

namespace {

// The call's copy at entry of watched tensor `w`: its snapshot (a list's member of it), or, around
// a view, the copy made for the check.
at::Tensor EntryCopy(const TorchValues& values, uint32_t index, int64_t member,
                     const at::Tensor& before) {
  if (before.defined()) return before;
  if (index >= values.inputs.size()) return {};
  const c10::IValue& v = values.inputs[index];
  if (member < 0) return v.isTensor() ? v.toTensor() : at::Tensor();
  if (v.isTensorList()) {
    const auto list = v.toTensorList();
    return static_cast<std::size_t>(member) < list.size() ? list.get(member) : at::Tensor();
  }
  if (v.isList()) {
    const auto list = v.toList();
    if (static_cast<std::size_t>(member) < list.size() && list.get(member).isTensor()) {
      return list.get(member).toTensor();
    }
  }
  return {};
}

}  // namespace

void CompareWatchedInputs(const std::vector<WatchedInput>& watched, TorchValues& values) {
  for (const WatchedInput& w : watched) {
    const at::Tensor before = EntryCopy(values, w.index, w.member, w.before);
    const at::Tensor& now = w.live;
    if (!before.defined() || before.sizes() != now.sizes() ||
        before.scalar_type() != now.scalar_type() || before.device() != now.device()) {
      continue;
    }
    TorchValues::InputWrite write{w.index, w.name, w.elements, 0, w.member, {}, {}, {}};
    try {
      if (now.device().is_cpu()) {
        // The usual case costs memcmp; elements are counted only when something changed.
        if ((before.is_contiguous() || before.strides() == now.strides()) &&
            SameBits(before, now)) {
          continue;
        }
        ForgetSnapshotsOf(now);  // written behind its schema: no earlier snapshot holds
        write.changed = CountChanged(before, now.detach(), w.inside).item<int64_t>();
        if (write.changed == 0) continue;
      } else {
        // An accelerator: a second copy, queued on the training's stream after the kernel, as
        // the snapshot was before it; the sender compares the two on the host. A copy is the one
        // kernel every device has (comparisons may not be: the test NPU's fallback has none).
        write.after = now.detach().clone(at::MemoryFormat::Contiguous);
        write.before = w.before;
        write.inside = w.inside;
        // Whether or not the kernel wrote it (the sender compares later), this copy is the
        // tensor as it is now: the snapshot the next call that reads it gets.
        if (!w.before.defined()) RememberSnapshot(now.detach(), write.after);
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
      // Kept for the calls that read it next (not around a view: that is no argument's value).
      const at::Tensor after = w.before.defined() ? w.after.to(at::kCPU) : HostCopyOf(w.after);
      const at::Tensor entry = EntryCopy(values, w.index, w.member, w.before);
      w.changed = 0;
      if (entry.defined()) {
        const at::Tensor before = entry.to(at::kCPU);
        const std::size_t bytes = static_cast<std::size_t>(after.numel()) * after.element_size();
        if (std::memcmp(before.data_ptr(), after.data_ptr(), bytes) != 0) {
          w.changed = CountChanged(before, after, w.inside).item<int64_t>();
        }
      }
    } catch (const std::exception& e) {
      LogOnce(values.op + " " + w.name + ": " + e.what());
      w.changed = 0;
    }
    w.after = at::Tensor();
    w.before = at::Tensor();
  }
}

void EncodeInputWrites(const TorchValues& values, wire::Message* fields) {
  // One entry per argument: a list's members (same index and name) summed.
  std::vector<const TorchValues::InputWrite*> firsts;
  std::vector<int64_t> changed;
  for (const TorchValues::InputWrite& w : values.input_writes) {
    if (w.changed <= 0) continue;
    std::size_t k = 0;
    while (k < firsts.size() && (firsts[k]->index != w.index || firsts[k]->name != w.name)) ++k;
    if (k == firsts.size()) {
      firsts.push_back(&w);
      changed.push_back(0);
    }
    changed[k] += w.changed;
  }
  for (std::size_t k = 0; k < firsts.size(); ++k) {
    wire::Message& m = fields->Sub(wire::kApiCallInputsWritten);
    m.Varint(wire::kInputWrittenIndex, firsts[k]->index);
    m.Bytes(wire::kInputWrittenName, firsts[k]->name);
    m.Varint(wire::kInputWrittenChangedElements, static_cast<uint64_t>(changed[k]));
    m.Varint(wire::kInputWrittenElements, static_cast<uint64_t>(firsts[k]->elements));
  }
  for (const std::string& note : values.unchecked_writes) {
    fields->Bytes(wire::kApiCallUncheckedWrites, note);
  }
}

}  // namespace parity::agent
