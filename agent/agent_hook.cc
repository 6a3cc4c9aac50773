// The RecordFunction hook: keeps the top-level operator of each call, copies its inputs at
// entry and outputs at exit, and hands them to the core's queue. Runs on training threads, so
// it does only what must be synchronous; protobuf building and I/O happen on the sender thread.
// No exception leaves these callbacks.
#include <ATen/SequenceNumber.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/agent_core.h"
#include "common/log.h"
#include "common/op_registry.h"
#include "common/torch/written_arguments.h"

namespace parity::agent {
namespace {

std::atomic<AgentCore*> g_core{nullptr};

struct ThreadState {
  int depth = 0;  // dispatcher ops open on this thread (the hook's own copies included)
  int optimizer = 0;
  struct Node {
    std::string name;
    int64_t sequence_nr;
  };
  std::vector<Node> nodes;  // autograd nodes being evaluated (backward)
  std::vector<std::string> modules;
};

ThreadState& State() {
  thread_local ThreadState state;
  return state;
}

// The context of a top-level call between its entry and exit.
struct CallContext : at::ObserverContext {
  std::unique_ptr<CapturedCall> call;
  int64_t forward_sequence = -1;
  // For an op that returns nothing: the arguments it writes (references, not copies), whose
  // values at exit are its results. libtorch 2.x does not keep fn.inputs() alive until then.
  std::vector<c10::IValue> written;
};

bool IsEngineWrapper(const char* name) {
  return absl::StartsWith(name, "autograd::engine::evaluate_function");
}

// A dispatcher op (has a schema name), other than the engine's wrapper records.
bool IsOp(const at::RecordFunction& fn) {
  return fn.scope() == at::RecordScope::FUNCTION && !IsEngineWrapper(fn.name()) &&
         fn.operator_name().has_value();
}

uint64_t Bytes(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? t.numel() * t.element_size() : 0;
  }
  uint64_t n = 0;
  if (v.isList()) {
    for (const c10::IValue& item : v.toListRef()) n += Bytes(item);
  } else if (v.isTuple()) {
    for (const c10::IValue& item : v.toTupleRef().elements()) n += Bytes(item);
  }
  return n;
}

// `v` with `leaf` applied to every value that is not a container (tensor lists, lists and
// tuples are rebuilt around the results).
template <typename Leaf>
c10::IValue MapLeaves(const c10::IValue& v, const Leaf& leaf) {
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const c10::IValue& t : v.toListRef()) out.push_back(leaf(t).toTensor());
    return out;
  }
  if (v.isList()) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const c10::IValue& item : v.toListRef()) out.push_back(MapLeaves(item, leaf));
    return out;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const c10::IValue& item : v.toTupleRef().elements()) {
      items.push_back(MapLeaves(item, leaf));
    }
    return c10::ivalue::Tuple::create(std::move(items));
  }
  return leaf(v);
}

// A copy the training cannot change afterwards (in-place ops, later steps). On an accelerator
// this is a device-side copy queued on the training's stream: the training thread does not
// wait; the sender copies it to the host after the call's event. Notes the accelerator in
// `call` so that the event is recorded without walking the values again.
c10::IValue Snapshot(const c10::IValue& v, CapturedCall& call) {
  return MapLeaves(v, [&call](const c10::IValue& leaf) {
    if (leaf.isTensor()) {
      const at::Tensor& t = leaf.toTensor();
      if (!t.defined() || t.is_sparse() || t.is_quantized()) return leaf;
      if (!call.accelerator && !t.device().is_cpu() && !t.is_meta()) {
        call.accelerator = t.device();
      }
      at::Tensor d = t.detach();
      if (d.is_conj()) d = d.resolve_conj();
      if (d.is_neg()) d = d.resolve_neg();
      return c10::IValue(d.clone(at::MemoryFormat::Contiguous));
    }
    if (leaf.isString()) return c10::IValue(std::string(leaf.toStringRef()));  // deep (1.13)
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

}  // namespace

c10::IValue ToHost(const c10::IValue& v) {
  return MapLeaves(v, [](const c10::IValue& leaf) {
    if (!leaf.isTensor()) return leaf;
    const at::Tensor& t = leaf.toTensor();
    return t.defined() && !t.device().is_cpu() && !t.is_meta() ? c10::IValue(t.to(at::kCPU)) : leaf;
  });
}

namespace {

// op, overload, then dtype and shape of each tensor argument.
std::string Signature(const std::string& op, const std::string& overload,
                      c10::ArrayRef<const c10::IValue> inputs) {
  std::string s = absl::StrCat(op, ".", overload);
  for (const c10::IValue& v : inputs) {
    if (v.isTensor() && v.toTensor().defined()) {
      const at::Tensor& t = v.toTensor();
      absl::StrAppend(&s, "|", static_cast<int>(t.scalar_type()), ":");
      for (int64_t d : t.sizes()) absl::StrAppend(&s, d, ",");
    } else if (v.isScalar()) {
      absl::StrAppend(&s, "|s");
    }
  }
  return s;
}

std::unique_ptr<at::ObserverContext> OnEnterImpl(const at::RecordFunction& fn) {
  AgentCore* core = g_core.load(std::memory_order_acquire);
  ThreadState& ts = State();
  switch (fn.scope()) {
    case at::RecordScope::BACKWARD_FUNCTION:
      ts.nodes.push_back({fn.name(), fn.seqNr()});
      return nullptr;
    case at::RecordScope::USER_SCOPE:
      if (absl::StartsWith(fn.name(), "Optimizer.step#")) ++ts.optimizer;
      return nullptr;
    default:
      break;
  }
  if (!IsOp(fn)) return nullptr;
  if (ts.depth++ > 0 || core == nullptr) return nullptr;  // nested, or the agent's own copies

  const std::string op = fn.name();
  if (absl::StartsWith(op, "parity::")) return nullptr;
  const bool backward = !ts.nodes.empty();
  const common::AgentConfig& cfg = core->config();
  if (backward && !cfg.parity.capture_backward) return nullptr;
  const int64_t step = core->step();
  if (!core->filter().StepSelected(step) || !core->filter().OpSelected(op)) return nullptr;

  auto call = std::make_unique<CapturedCall>();
  v1::ApiCall& m = call->meta;
  m.set_op_name(op);
  const c10::OperatorName name = *fn.operator_name();  // IsOp: present
  m.set_overload(name.overload_name);
  m.set_step(step);
  m.set_phase(backward ? v1::PHASE_BACKWARD : v1::PHASE_FORWARD);
  m.set_in_optimizer(ts.optimizer > 0);
  if (!ts.modules.empty()) m.set_module_path(ts.modules.back());
  int64_t forward_sequence = -1;
  if (backward) {
    m.set_autograd_node(ts.nodes.back().name);
    m.set_autograd_sequence_nr(ts.nodes.back().sequence_nr);
    AgentCore::ForwardCall fwd;
    if (core->LinkBackward(ts.nodes.back().sequence_nr, &fwd)) {
      m.set_forward_op_name(fwd.op);
      m.set_forward_overload(fwd.overload);
      m.set_call_index(fwd.call_index);
      m.set_backward_index(fwd.backward_calls);
    } else {
      m.set_call_index(core->NextCallIndex(op));
    }
  } else {
    m.set_call_index(core->NextCallIndex(op));
    forward_sequence = static_cast<int64_t>(at::sequence_number::peek());
  }
  // Forward calls are linked even when not checked, so backward names stay right.
  if (!backward) core->RecordForward(forward_sequence, {op, m.overload(), m.call_index()});

  if (!core->scope().Selected(absl::StrCat(op, ".", m.call_index()))) return nullptr;
  m.set_capture_unix_nanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count());
  std::string skip = common::SkipReasonForOp(op);
  if (!skip.empty()) {
    // Sent without data: the server reports it as SKIP with the reason.
    m.set_skip_reason(std::move(skip));
    m.set_sequence(core->NextSequence());
    core->counters().captured.fetch_add(1, std::memory_order_relaxed);
    core->Enqueue(std::move(call));
    return nullptr;
  }
  const c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
  if (!core->budget().unlimited() && !core->budget().Take(Signature(op, m.overload(), inputs))) {
    core->counters().sampled_out.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  uint64_t bytes = 0;
  for (const c10::IValue& v : inputs) bytes += Bytes(v);
  // Outputs are usually about as large as inputs: reserve for both before copying anything.
  if (!core->AdmitOrDrop(2 * bytes)) return nullptr;
  call->inputs.reserve(inputs.size());
  for (const c10::IValue& v : inputs) call->inputs.push_back(Snapshot(v, *call));
  call->bytes = bytes;
  auto ctx = std::make_unique<CallContext>();
  if (auto handle = c10::Dispatcher::singleton().findSchema(name)) {
    for (std::size_t i : common::WrittenArguments(handle->schema())) {
      if (i < inputs.size()) ctx->written.push_back(inputs[i]);
    }
  }
  ctx->call = std::move(call);
  ctx->forward_sequence = forward_sequence;
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
        if (AgentCore* core = g_core.load(std::memory_order_acquire)) core->OptimizerStepDone();
      }
      return;
    default:
      break;
  }
  if (!IsOp(fn)) return;
  // Snapshot while the depth is still raised, so the copies are not captured.
  auto* ctx = static_cast<CallContext*>(raw);
  AgentCore* core = g_core.load(std::memory_order_acquire);
  if (ctx != nullptr && ctx->call && core != nullptr) {
    std::unique_ptr<CapturedCall> call = std::move(ctx->call);
    for (const c10::IValue& v : fn.outputs().empty() ? ctx->written : fn.outputs()) {
      call->outputs.push_back(Snapshot(v, *call));
      call->bytes += Bytes(v);
    }
    MarkDeviceReady(*call);
    call->meta.set_sequence(core->NextSequence());
    core->counters().captured.fetch_add(1, std::memory_order_relaxed);
    core->Enqueue(std::move(call));
  }
  --ts.depth;
}

// Logged at most every 30 s: a failing op may run thousands of times a second.
void LogCaptureFailure(const at::RecordFunction& fn, const std::exception& e) {
  static common::RateLimiter limiter(std::chrono::seconds(30));
  uint64_t suppressed = 0;
  if (limiter.Allow(&suppressed)) {
    common::LogWarning(absl::StrCat("capture failed for ", fn.name(), ": ", e.what(), " (",
                                    suppressed, " more suppressed)"));
  }
}

// The callbacks' boundary: nothing escapes into the training.
std::unique_ptr<at::ObserverContext> OnEnter(const at::RecordFunction& fn) {
  try {
    return OnEnterImpl(fn);
  } catch (const std::exception& e) {
    LogCaptureFailure(fn, e);
  } catch (...) {
  }
  return nullptr;
}

void OnExit(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  try {
    OnExitImpl(fn, ctx);
  } catch (const std::exception& e) {
    LogCaptureFailure(fn, e);
  } catch (...) {
  }
}

}  // namespace

uint64_t InstallHook(AgentCore* core) {
  g_core.store(core, std::memory_order_release);
  return at::addGlobalCallback(
      at::RecordFunctionCallback(&OnEnter, &OnExit)
          .needsInputs(true)
          .needsOutputs(true)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                   at::RecordScope::USER_SCOPE}));
}

void RemoveHook(uint64_t handle) {
  if (handle != 0) at::removeCallback(handle);
  g_core.store(nullptr, std::memory_order_release);
}

void MarkAgentThread() { State().depth = 1 << 20; }

void PushModuleScope(const std::string& path) { State().modules.push_back(path); }
void PopModuleScope() {
  if (!State().modules.empty()) State().modules.pop_back();
}

}  // namespace parity::agent
