#include "agent/agent_hook.h"

#include <ATen/SequenceNumber.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <atomic>
#include <chrono>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/buffer_pool.h"
#include "common/log.h"
#include "common/random_ops.h"
#include "common/torch/autocast.h"
#include "common/torch/boxed_call.h"
#include "common/torch/dtype_map.h"
#include "common/torch/generator_state.h"
#include "common/torch/ivalue_walk.h"

namespace parity::agent {
namespace {

std::atomic<CaptureSink*> g_sink{nullptr};

// Per training thread.
struct ThreadState {
  int depth = 0;  // dispatcher ops open on this thread (the hook's own copies included)
  int optimizer = 0;
  struct Node {
    std::string name;
    int64_t sequence_nr;
  };
  std::vector<Node> nodes;  // autograd nodes being evaluated (backward)
  // The engine's "evaluate_function" records: work the engine does for a node outside the node
  // itself (checking and reshaping its gradients, adding up gradients of one input) runs here.
  std::vector<Node> engine;
  std::vector<std::string> modules;
};

ThreadState& State() {
  thread_local ThreadState state;
  return state;
}

// Lowers the thread's op depth when an op's exit ends, whatever happens in between: an
// exception must not leave the thread believing it is inside an op forever (it would never
// capture again).
class DepthExit {
 public:
  explicit DepthExit(ThreadState& ts) : ts_(ts) {}
  ~DepthExit() { --ts_.depth; }
  DepthExit(const DepthExit&) = delete;
  DepthExit& operator=(const DepthExit&) = delete;

 private:
  ThreadState& ts_;
};

// The context of a top-level call between its entry and exit.
struct CallContext : at::ObserverContext {
  std::unique_ptr<CapturedCall> call;
  // For an op that returns nothing: the arguments it writes (references, not copies), whose
  // values at exit are its results. libtorch 2.x does not keep fn.inputs() alive until then.
  std::vector<c10::IValue> written;
};

constexpr absl::string_view kEngineWrapper = "autograd::engine::evaluate_function: ";

bool IsEngineWrapper(const char* name) { return absl::StartsWith(name, kEngineWrapper); }

// A dispatcher op (has a schema name; the engine's wrapper records have none).
bool IsOp(const at::RecordFunction& fn) {
  return fn.scope() == at::RecordScope::FUNCTION && fn.operator_name().has_value();
}

uint64_t Bytes(const c10::IValue& v) {
  uint64_t n = 0;
  common::ForEachLeaf(v, [&n](const c10::IValue& leaf) {
    if (leaf.isTensor() && leaf.toTensor().defined()) {
      n += leaf.toTensor().numel() * leaf.toTensor().element_size();
    }
  });
  return n;
}

// Snapshot buffers: host copies of at least this many bytes come from the pool.
constexpr uint64_t kPooledMinBytes = 16 << 10;
std::atomic<bool> g_pool_on{true};

BufferPool& SnapshotPool() {
  static BufferPool* pool = new BufferPool(uint64_t{128} << 20);  // outlives every snapshot
  return *pool;
}

// A contiguous copy of `d`: a CPU tensor of kPooledMinBytes or more into a pooled buffer (no
// page faults once the pool is warm), anything else by clone(). A contiguous CPU tensor is
// copied with memcpy: copy_ would go through the dispatcher and set up a TensorIterator for
// every tensor of every call (measured: docs/performance.md).
at::Tensor PooledCopy(const at::Tensor& d) {
  const uint64_t bytes = static_cast<uint64_t>(d.numel()) * d.element_size();
  const bool cpu = d.device().is_cpu() && d.layout() == at::kStrided;
  const bool flat = cpu && d.is_contiguous() && bytes > 0;
  if (!cpu || bytes < kPooledMinBytes || !g_pool_on.load(std::memory_order_relaxed)) {
    if (!flat) return d.clone(at::MemoryFormat::Contiguous);
    at::Tensor out = at::empty(d.sizes(), d.options());
    std::memcpy(out.data_ptr(), d.data_ptr(), bytes);
    return out;
  }
  uint64_t capacity = 0;
  void* buffer = SnapshotPool().Take(bytes, &capacity);
  if (buffer == nullptr) return d.clone(at::MemoryFormat::Contiguous);
  at::Tensor out = at::from_blob(
      buffer, d.sizes(), [capacity](void* p) { SnapshotPool().Give(p, capacity); }, d.options());
  if (flat) {
    std::memcpy(buffer, d.data_ptr(), bytes);
  } else {
    out.copy_(d);
  }
  return out;
}

// A copy the training cannot change afterwards (in-place ops, later steps). On an accelerator
// this is a device-side copy queued on the training's stream: the training thread does not
// wait; the sender copies it to the host after the call's event. Notes the accelerator in
// `call` so that the event is recorded without walking the values again.
c10::IValue Snapshot(const c10::IValue& v, CapturedCall& call) {
  return common::MapLeaves(v, [&call](const c10::IValue& leaf) {
    if (leaf.isTensor()) {
      const at::Tensor& t = leaf.toTensor();
      if (!t.defined() || t.is_sparse() || t.is_quantized()) return leaf;
      if (!call.accelerator && !t.device().is_cpu() && !t.is_meta()) {
        call.accelerator = t.device();
      }
      at::Tensor d = t.detach();
      if (d.is_conj()) d = d.resolve_conj();
      if (d.is_neg()) d = d.resolve_neg();
      return c10::IValue(PooledCopy(d));
    }
    if (leaf.isString()) return c10::IValue(std::string(leaf.toStringRef()));  // deep (1.13)
    // A generator travels as None; a random op's generator state goes in ApiCall.generator.
    if (leaf.isGenerator()) return c10::IValue();
    return leaf;
  });
}

// Records, on the current stream of the call's accelerator, the event after which its device
// snapshots are complete. A device without events gets host copies now (synchronously).
void MarkDeviceReady(CapturedCall& call) {
  if (!call.accelerator) return;
  const c10::Device device = *call.accelerator;
  try {
    c10::impl::VirtualGuardImpl impl(device.type());
    c10::Event event(device.type());
    event.record(impl.getStream(device));
    call.device_ready.emplace(std::move(event));
  } catch (const std::exception&) {
    for (auto* values : {&call.inputs, &call.outputs}) {
      for (c10::IValue& v : *values) v = ToHost(v);
    }
  }
}

// The device type of the call's first defined tensor; CPU when it has none.
c10::DeviceType DeviceTypeOf(c10::ArrayRef<const c10::IValue> inputs) {
  for (const c10::IValue& v : inputs) {
    std::optional<c10::DeviceType> found;
    common::ForEachLeaf(v, [&](const c10::IValue& leaf) {
      if (!found && leaf.isTensor() && leaf.toTensor().defined()) {
        found = leaf.toTensor().device().type();
      }
    });
    if (found) return *found;
  }
  return c10::DeviceType::CPU;
}

// The generator a random op is about to draw from: its explicit `generator` argument, else the
// default generator of its device (a `device` argument of a factory op, else its first tensor's
// device, else the CPU).
std::optional<at::Generator> GeneratorOf(c10::ArrayRef<const c10::IValue> inputs) {
  std::optional<c10::Device> device;
  for (const c10::IValue& v : inputs) {
    if (v.isGenerator()) return v.toGenerator();
    if (!device && v.isDevice()) device = v.toDevice();
  }
  if (!device) {
    for (const c10::IValue& v : inputs) {
      common::ForEachLeaf(v, [&](const c10::IValue& leaf) {
        if (!device && leaf.isTensor() && leaf.toTensor().defined()) {
          device = leaf.toTensor().device();
        }
      });
    }
  }
  absl::StatusOr<at::Generator> gen = common::DefaultGenerator(device.value_or(c10::kCPU));
  if (!gen.ok()) return std::nullopt;
  return *gen;
}

CallSite SiteOf(const at::RecordFunction& fn, const ThreadState& ts) {
  CallSite site;
  site.op = fn.name();
  site.overload = fn.operator_name()->overload_name;  // IsOp: present
  // Inside a node; or inside the engine's work for a node, outside the node itself: the sum
  // that reduces a broadcast gradient to its input's shape, the add that accumulates the
  // gradients of an input used twice. Both are that node's backward work.
  site.backward = !ts.nodes.empty() || !ts.engine.empty();
  if (site.backward) {
    const ThreadState::Node& node = ts.nodes.empty() ? ts.engine.back() : ts.nodes.back();
    site.node = node.name;
    site.node_sequence_nr = node.sequence_nr;
  } else {
    site.forward_sequence_nr = static_cast<int64_t>(at::sequence_number::peek());
  }
  site.in_optimizer = ts.optimizer > 0;
  if (!ts.modules.empty()) site.module = ts.modules.back();
  site.inputs = fn.inputs();
  return site;
}

std::unique_ptr<at::ObserverContext> OnEnterImpl(const at::RecordFunction& fn) {
  ThreadState& ts = State();
  switch (fn.scope()) {
    case at::RecordScope::BACKWARD_FUNCTION:
      ts.nodes.push_back({fn.name(), fn.seqNr()});
      // The engine's wrapper record carries no sequence number; the node's own record, which
      // runs inside it, does. The wrapper's work after the node (reducing and accumulating its
      // gradients) is then linked to the node's forward call like the node's own ops.
      if (!ts.engine.empty() && ts.engine.back().sequence_nr < 0 &&
          ts.engine.back().name == fn.name()) {
        ts.engine.back().sequence_nr = fn.seqNr();
      }
      return nullptr;
    case at::RecordScope::USER_SCOPE:
      if (absl::StartsWith(fn.name(), "Optimizer.step#")) ++ts.optimizer;
      return nullptr;
    case at::RecordScope::FUNCTION:
      if (IsEngineWrapper(fn.name())) {
        ts.engine.push_back(
            {std::string(absl::string_view(fn.name()).substr(kEngineWrapper.size())), fn.seqNr()});
        return nullptr;
      }
      break;
    default:
      break;
  }
  if (!IsOp(fn)) return nullptr;
  CaptureSink* sink = g_sink.load(std::memory_order_acquire);
  if (ts.depth++ > 0 || sink == nullptr) return nullptr;  // nested, or the agent's own copies
  if (absl::StartsWith(fn.name(), "parity::")) return nullptr;

  auto call = std::make_unique<CapturedCall>();
  const CallSite site = SiteOf(fn, ts);
  if (!sink->Begin(site, &call->meta)) return nullptr;
  if (!call->meta.skip_reason().empty()) {  // sent without its values: the server says why
    sink->Capture(std::move(call));
    return nullptr;
  }
  // Autocast on the call's device: the inputs seen here are the ones before autocast cast them,
  // so the server replays the bench under the same autocast.
  if (std::optional<at::ScalarType> autocast = common::ActiveAutocast(DeviceTypeOf(site.inputs))) {
    if (std::optional<v1::DType> d = common::ToWireDType(*autocast)) {
      call->meta.set_autocast_dtype(*d);
    }
  }
  uint64_t bytes = 0;
  for (const c10::IValue& v : site.inputs) bytes += Bytes(v);
  const bool random = common::RandomFamilyOf(site.op) != common::RandomFamily::kNone;
  // Outputs are usually about as large as inputs: room for both before copying anything.
  if (!sink->Admit(2 * bytes)) return nullptr;
  // A random op: its generator's state now, before it draws, so the server can replay the draw.
  if (random) {
    if (std::optional<at::Generator> gen = GeneratorOf(site.inputs)) {
      *call->meta.mutable_generator() = common::ReadGeneratorState(*gen);
    }
  }
  call->inputs.reserve(site.inputs.size());
  const auto copy_start = std::chrono::steady_clock::now();
  for (const c10::IValue& v : site.inputs) call->inputs.push_back(Snapshot(v, *call));
  call->snapshot_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();
  call->bytes = bytes;
  auto ctx = std::make_unique<CallContext>();
  if (auto handle = c10::Dispatcher::singleton().findSchema(*fn.operator_name())) {
    for (std::size_t i : common::WrittenArguments(handle->schema())) {
      if (i < site.inputs.size()) ctx->written.push_back(site.inputs[i]);
    }
  }
  ctx->call = std::move(call);
  return ctx;
}

void OnExitImpl(const at::RecordFunction& fn, at::ObserverContext* raw) {
  ThreadState& ts = State();
  switch (fn.scope()) {
    case at::RecordScope::BACKWARD_FUNCTION:
      if (!ts.nodes.empty()) ts.nodes.pop_back();
      return;
    case at::RecordScope::USER_SCOPE:
      if (absl::StartsWith(fn.name(), "Optimizer.step#") && ts.optimizer > 0) {
        --ts.optimizer;
        if (CaptureSink* sink = g_sink.load(std::memory_order_acquire)) sink->OptimizerStepDone();
      }
      return;
    case at::RecordScope::FUNCTION:
      if (IsEngineWrapper(fn.name())) {
        if (!ts.engine.empty()) ts.engine.pop_back();
        return;
      }
      break;
    default:
      break;
  }
  if (!IsOp(fn)) return;
  const DepthExit exit(ts);  // the snapshots below run with the depth still raised: not captured
  auto* ctx = static_cast<CallContext*>(raw);
  CaptureSink* sink = g_sink.load(std::memory_order_acquire);
  if (ctx == nullptr || !ctx->call || sink == nullptr) return;
  std::unique_ptr<CapturedCall> call = std::move(ctx->call);
  const auto copy_start = std::chrono::steady_clock::now();
  for (const c10::IValue& v : fn.outputs().empty() ? ctx->written : fn.outputs()) {
    call->outputs.push_back(Snapshot(v, *call));
    call->bytes += Bytes(v);
  }
  call->snapshot_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();
  MarkDeviceReady(*call);
  sink->Capture(std::move(call));
}

// Logged at most every 30 s: a failing op may run thousands of times a second.
void LogCaptureFailure(const at::RecordFunction& fn, const char* what) {
  static common::RateLimiter limiter(std::chrono::seconds(30));
  uint64_t suppressed = 0;
  if (limiter.Allow(&suppressed)) {
    common::LogWarning(absl::StrCat("capture failed for ", fn.name(), ": ", what, " (", suppressed,
                                    " more suppressed)"));
  }
}

// The callbacks' boundary: nothing escapes into the training.
std::unique_ptr<at::ObserverContext> OnEnter(const at::RecordFunction& fn) {
  try {
    return OnEnterImpl(fn);
  } catch (const std::exception& e) {
    LogCaptureFailure(fn, e.what());
  } catch (...) {
    LogCaptureFailure(fn, "unknown exception");
  }
  return nullptr;
}

void OnExit(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  try {
    OnExitImpl(fn, ctx);
  } catch (const std::exception& e) {
    LogCaptureFailure(fn, e.what());
  } catch (...) {
    LogCaptureFailure(fn, "unknown exception");
  }
}

}  // namespace

c10::IValue ToHost(const c10::IValue& v) {
  return common::MapLeaves(v, [](const c10::IValue& leaf) {
    if (!leaf.isTensor()) return leaf;
    const at::Tensor& t = leaf.toTensor();
    return t.defined() && !t.device().is_cpu() && !t.is_meta() ? c10::IValue(t.to(at::kCPU)) : leaf;
  });
}

std::vector<std::string> RegisteredOpNames() {
  std::vector<std::string> names;
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
    names.push_back(op.name);
  }
  return names;
}

void ConfigureSnapshotPool(uint64_t max_cached_bytes) {
  SnapshotPool().SetMaxCached(max_cached_bytes);
  g_pool_on.store(max_cached_bytes > 0, std::memory_order_relaxed);
}

uint64_t InstallHook(CaptureSink* sink) {
  g_sink.store(sink, std::memory_order_release);
  return at::addGlobalCallback(
      at::RecordFunctionCallback(&OnEnter, &OnExit)
          .needsInputs(true)
          .needsOutputs(true)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                   at::RecordScope::USER_SCOPE}));
}

void RemoveHook(uint64_t handle) {
  if (handle != 0) at::removeCallback(handle);
  g_sink.store(nullptr, std::memory_order_release);
}

void MarkAgentThread() { State().depth = 1 << 20; }

void PushModuleScope(const std::string& path) { State().modules.push_back(path); }
void PopModuleScope() {
  if (!State().modules.empty()) State().modules.pop_back();
}

}  // namespace parity::agent
