#include "agent/torch/agent_hook.h"

#include <ATen/SequenceNumber.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "agent/torch/call_context.h"
#include "agent/torch/call_inputs.h"
#include "agent/torch/input_writes.h"
#include "agent/torch/snapshot.h"
#include "agent/torch/snapshot_cache.h"
#include "agent/torch/torch_values.h"
#include "common/torch/autocast.h"
#include "common/torch/boxed_call.h"
#include "common/torch/generator_read.h"
#include "common/torch/ivalue_walk.h"
#include "common/torch/wire_enums.h"

namespace parity::agent {
namespace {

std::atomic<parity_session*> g_session{nullptr};
std::atomic<bool> g_signatures{false};  // the session's budget wants call signatures

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
  int compiled = 0;  // torch.compile regions running on this thread (nested ones counted once)
  std::vector<bool> compiled_records;  // per compiled-region record open: whether it counted
  // msprobe's API of the Python call running (parity_agent_set_api): the next top-level forward
  // op takes it. Points into the Python agent's name table, which outlives it.
  const char* pending_api = nullptr;
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

bool StartsWith(const char* s, std::string_view prefix) {
  return std::strncmp(s, prefix.data(), prefix.size()) == 0;
}

// Ops a Python API may run before its own one (to broadcast, reshape or convert its arguments):
// such an op takes the API's name only when it is the API ("Torch.broadcast_tensors").
bool HelperOfAnotherApi(const std::string& op, const char* api) {
  static constexpr std::string_view kHelpers[] = {"broadcast_tensors",
                                                  "expand",
                                                  "expand_as",
                                                  "view",
                                                  "reshape",
                                                  "contiguous",
                                                  "to",
                                                  "_to_copy",
                                                  "unsqueeze",
                                                  "squeeze",
                                                  "t",
                                                  "transpose",
                                                  "detach",
                                                  "clone",
                                                  "result_type",
                                                  "zeros_like",
                                                  "ones_like",
                                                  "empty_like",
                                                  "full_like",
                                                  "size",
                                                  "flatten",
                                                  "type_as"};
  const std::size_t colon = op.rfind("::");
  const std::string_view bare =
      colon == std::string::npos ? std::string_view(op) : std::string_view(op).substr(colon + 2);
  bool helper = false;
  for (std::string_view h : kHelpers) helper = helper || bare == h;
  if (!helper) return false;
  const std::string_view name(api);
  const std::size_t dot = name.rfind('.');
  return (dot == std::string_view::npos ? name : name.substr(dot + 1)) != bare;
}

constexpr std::string_view kEngineWrapper = "autograd::engine::evaluate_function: ";

bool IsEngineWrapper(const char* name) { return StartsWith(name, kEngineWrapper); }

// What torch.compile runs shows up as records of its own (docs/operators.md#torchcompile):
// dynamo's "Torch-Compiled Region: 0/0" around a compiled frame (torch 2.6 and later), AOT
// autograd's CompiledFunction (an autograd.Function, every torch 2.x) inside it, and that
// function's backward node, CompiledFunctionBackward.
bool IsCompiledRegion(const char* name) {
  return StartsWith(name, "Torch-Compiled Region") || std::string_view(name) == "CompiledFunction";
}
bool IsCompiledBackward(const char* name) {
  return std::string_view(name) == "CompiledFunctionBackward";
}

// A training's own autograd.Function began (its apply's record: the class name, and the
// sequence number its backward node takes): the calls that node's backward runs are named after
// it, not after whichever forward op ran last before it (issue 50).
// The caller has seen that the record is no operator and ran on real tensors.
void NoteCustomFunction(const at::RecordFunction& fn, const ThreadState& ts) {
  if (ts.depth > 0 || fn.seqNr() < 0) return;
  if (parity_session* s = g_session.load(std::memory_order_acquire)) {
    parity_session_custom_function(s, fn.name(), fn.seqNr(),
                                   ts.modules.empty() ? "" : ts.modules.back().c_str());
  }
}

// A compiled region's record begins (counted once when regions nest) or ends. While torch
// compiles, AOT autograd runs CompiledFunction on fake tensors (19 times for a small block, torch
// 2.1): those compute nothing and are not regions that ran.
void EnterCompiled(const at::RecordFunction& fn, ThreadState& ts, bool backward) {
  const bool counts = !Traced(fn.inputs());
  ts.compiled_records.push_back(counts);
  if (!counts || ts.compiled++ > 0) return;
  if (parity_session* s = g_session.load(std::memory_order_acquire)) {
    parity_session_compiled_region(s, backward ? 1 : 0);
  }
}
void LeaveCompiled(ThreadState& ts) {
  if (ts.compiled_records.empty()) return;
  if (ts.compiled_records.back() && ts.compiled > 0) --ts.compiled;
  ts.compiled_records.pop_back();
}

// A dispatcher op (has a schema name; the engine's wrapper records have none).
bool IsOp(const at::RecordFunction& fn) {
  return fn.scope() == at::RecordScope::FUNCTION && fn.operator_name().has_value();
}

// What the session is told of a call: parity_call_site, with the strings it points to.
struct Site {
  std::string op, overload, node, module, signature;
  parity_call_site c{};
};

void SiteOf(const at::RecordFunction& fn, ThreadState& ts, Site& site) {
  parity_call_site& c = site.c;
  c = parity_call_site{};
  c.size = sizeof(c);
  site.node.clear();
  site.module.clear();
  site.op = fn.name();
  site.overload = fn.operator_name()->overload_name;  // IsOp: present
  // Inside a node; or inside the engine's work for a node, outside the node itself: the sum
  // that reduces a broadcast gradient to its input's shape, the add that accumulates the
  // gradients of an input used twice. Both are that node's backward work.
  c.backward = !ts.nodes.empty() || !ts.engine.empty();
  c.node_sequence_nr = -1;
  c.forward_sequence_nr = -1;
  if (c.backward) {
    const ThreadState::Node& node = ts.nodes.empty() ? ts.engine.back() : ts.nodes.back();
    site.node = node.name;
    c.node_sequence_nr = node.sequence_nr;
  } else {
    c.forward_sequence_nr = static_cast<int64_t>(at::sequence_number::peek());
  }
  c.in_optimizer = ts.optimizer > 0;
  c.in_compiled_region = ts.compiled > 0;
  if (!ts.modules.empty()) site.module = ts.modules.back();
  // The Python API that ran this op: the first top-level forward op inside it takes its name
  // (a second one, __setitem__'s copy after its index, say, is named from its operator), unless
  // that op is a helper the API runs before its own (F.mse_loss's broadcast_tensors): then the
  // name waits for the next op, or the API's own op would be named from its operator with the
  // same name as the helper's row ("Functional.mse_loss.0" twice).
  c.api = nullptr;
  if (!c.backward && ts.pending_api != nullptr && !HelperOfAnotherApi(site.op, ts.pending_api)) {
    c.api = ts.pending_api;
    ts.pending_api = nullptr;
  }
  if (g_signatures.load(std::memory_order_relaxed)) {
    Signature(site.op, site.overload, fn.inputs(), &site.signature);
    c.signature = site.signature.c_str();
  }
  c.communicates = Communicates(site.op, site.overload) ? 1 : 0;
  c.op = site.op.c_str();
  c.overload = site.overload.c_str();
  c.node = site.node.c_str();
  c.module = site.module.c_str();
}

// The records that only tell where later ops run (an autograd node, the engine's wrapper of
// one, an optimizer step): noted in the thread's state. True when `fn` was one of them.
bool TrackContext(const at::RecordFunction& fn, ThreadState& ts) {
  switch (fn.scope()) {
    case at::RecordScope::BACKWARD_FUNCTION:
      ts.nodes.push_back({fn.name(), fn.seqNr()});
      if (IsCompiledBackward(fn.name())) EnterCompiled(fn, ts, true);
      // The engine's wrapper record carries no sequence number; the node's own record, which
      // runs inside it, does. The wrapper's work after the node (reducing and accumulating its
      // gradients) is then linked to the node's forward call like the node's own ops.
      if (!ts.engine.empty() && ts.engine.back().sequence_nr < 0 &&
          ts.engine.back().name == fn.name()) {
        ts.engine.back().sequence_nr = fn.seqNr();
      }
      return true;
    case at::RecordScope::USER_SCOPE:
      if (StartsWith(fn.name(), "Optimizer.step#")) ++ts.optimizer;
      return true;
    case at::RecordScope::FUNCTION:
      if (IsCompiledRegion(fn.name())) {
        EnterCompiled(fn, ts, false);
        if (ts.compiled_records.back()) NoteCustomFunction(fn, ts);  // CompiledFunction
        return true;
      }
      if (IsEngineWrapper(fn.name())) {
        ts.engine.push_back(
            {std::string(std::string_view(fn.name()).substr(kEngineWrapper.size())), fn.seqNr()});
        return true;
      }
      // Not an operator ("ns::name"): an autograd.Function's apply. Every op's record passes
      // here, so the cheap tests go first and Traced() (the hook's own, again) only for those.
      if (fn.seqNr() >= 0 && ts.depth == 0 && std::strchr(fn.name(), ':') == nullptr &&
          !Traced(fn.inputs())) {
        NoteCustomFunction(fn, ts);
      }
      return false;
    default:
      return false;
  }
}

// Device types without a default generator (a test device, a backend that registers none): found
// once, since asking libtorch throws, which is slow.
std::atomic<uint64_t> g_no_generator{0};

void WatchGenerator(CallContext& ctx, c10::ArrayRef<const c10::IValue> inputs) {
  const auto type = static_cast<int>(DeviceTypeOf(inputs));
  const uint64_t bit = type >= 0 && type < 64 ? uint64_t{1} << type : 0;
  if ((g_no_generator.load(std::memory_order_relaxed) & bit) != 0) return;
  ctx.watched = GeneratorOf(inputs);
  if (!ctx.watched) {
    g_no_generator.fetch_or(bit, std::memory_order_relaxed);
    return;
  }
  // Compared at exit, and the state to replay from should the call draw: a copy of the CPU
  // generator's engine, no tensor nor allocation (tests/bench/generator_watch_bench).
  ctx.entry.Take(*ctx.watched);
}

// After the call: a generator that moved means the call drew random numbers.
void CheckWatchedGenerator(CallContext& ctx) {
  if (!ctx.watched || !ctx.entry.Moved(*ctx.watched)) return;
  const std::string device_type =
      c10::DeviceTypeName(ctx.watched->device().type(), /*lower_case=*/true);
  static const std::string torch_version = common::TorchVersion();
  const std::string state = ctx.entry.StateBytes();
  parity_call_set_generator(ctx.call, device_type.c_str(), ctx.watched->device().index(),
                            state.data(), state.size(), torch_version.c_str());
}

// What the call's replay needs besides its values: the autocast it ran under and, for a random
// op, its generator's state before it draws.
void SetReplayContext(parity_call* call, uint32_t flags, c10::ArrayRef<const c10::IValue> inputs) {
  // Autocast on the call's device: the inputs seen here are the ones before autocast cast them,
  // so the server replays the bench under the same autocast.
  if (std::optional<at::ScalarType> autocast = common::ActiveAutocast(DeviceTypeOf(inputs))) {
    if (std::optional<wire::DType> d = common::WireDTypeOf(*autocast)) {
      parity_call_set_autocast_dtype(call, *d);
    }
  }
  if ((flags & PARITY_CALL_RANDOM) == 0) return;
  if (std::optional<at::Generator> gen = GeneratorOf(inputs)) {
    const std::string state = common::GeneratorStateBytes(*gen);
    const std::string device_type = c10::DeviceTypeName(gen->device().type(), /*lower_case=*/true);
    static const std::string torch_version = common::TorchVersion();
    parity_call_set_generator(call, device_type.c_str(), gen->device().index(), state.data(),
                              state.size(), torch_version.c_str());
  }
}

std::unique_ptr<at::ObserverContext> OnEnterImpl(const at::RecordFunction& fn) {
  ThreadState& ts = State();
  if (TrackContext(fn, ts) || !IsOp(fn)) return nullptr;
  parity_session* session = g_session.load(std::memory_order_acquire);
  if (ts.depth++ > 0 || session == nullptr) return nullptr;  // nested, or the agent's own copies
  // A top-level call's writes, captured or not: the snapshots of what it writes are let go when
  // this returns, after its own inputs' snapshots (agent/torch/snapshot_cache.h). At entry: a
  // boxed call's kernel consumes its inputs, so they cannot be read at exit.
  ForgetWrittenOnReturn forget_written(fn);
  if (StartsWith(fn.name(), "parity::")) return nullptr;
  if (Traced(fn.inputs())) return nullptr;

  thread_local Site site;  // its strings' buffers reused call after call (top-level calls only)
  SiteOf(fn, ts, site);
  uint32_t flags = 0;
  parity_call* call = parity_call_begin(session, &site.c, &flags);
  if (call == nullptr) return nullptr;
  if ((flags & PARITY_CALL_WITH_VALUES) == 0) {  // sent without its values: the server says why
    parity_call_capture(call, nullptr);
    return nullptr;
  }
  auto ctx = std::make_unique<CallContext>();
  ctx->call = call;  // discarded with the context unless captured
  const c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
  uint64_t bytes = 0;
  for (const c10::IValue& v : inputs) bytes += ValueBytes(v);
  // Outputs are usually about as large as inputs: room for both before copying anything.
  if (!parity_session_admit(session, 2 * bytes)) return nullptr;
  SetReplayContext(call, flags, inputs);
  if ((flags & PARITY_CALL_WATCH_GENERATOR) != 0) WatchGenerator(*ctx, inputs);
  auto values = NewTorchValues();
  values->op = site.op;
  values->overload = site.overload;
  const auto handle = c10::Dispatcher::singleton().findSchema(*fn.operator_name());
  if (handle) forget_written.set_schema(&handle->schema());
  const std::size_t sent = handle ? SentArguments(handle->schema(), inputs) : inputs.size();
  values->inputs.reserve(sent);
  const auto copy_start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < sent; ++i) values->inputs.push_back(Snapshot(inputs[i], *values));
  values->snapshot_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();
  values->bytes = bytes;
  if (handle) {
    for (std::size_t i : common::WrittenArguments(handle->schema())) {
      if (i < inputs.size()) ctx->written.push_back(inputs[i]);
    }
    if ((flags & PARITY_CALL_CHECK_INPUTS) != 0) {
      ctx->SwapReadOnlyList();
      WatchReadOnlyInputs(handle->schema(), inputs, sent, &ctx->read_only,
                          &values->unchecked_writes);
    }
  }
  ctx->values = std::move(values);
  return ctx;
}

void OnExitImpl(const at::RecordFunction& fn, at::ObserverContext* raw) {
  ThreadState& ts = State();
  switch (fn.scope()) {
    case at::RecordScope::BACKWARD_FUNCTION:
      if (!ts.nodes.empty()) ts.nodes.pop_back();
      if (IsCompiledBackward(fn.name())) LeaveCompiled(ts);
      return;
    case at::RecordScope::USER_SCOPE:
      if (StartsWith(fn.name(), "Optimizer.step#") && ts.optimizer > 0) {
        --ts.optimizer;
        if (parity_session* s = g_session.load(std::memory_order_acquire)) {
          parity_session_optimizer_step_done(s);
        }
      }
      return;
    case at::RecordScope::FUNCTION:
      if (IsCompiledRegion(fn.name())) {
        LeaveCompiled(ts);
        return;
      }
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
  if (ctx == nullptr || ctx->call == nullptr || !ctx->values) return;
  CheckWatchedGenerator(*ctx);
  std::unique_ptr<TorchValues> values = std::move(ctx->values);
  const auto copy_start = std::chrono::steady_clock::now();
  CompareWatchedInputs(ctx->read_only, *values);
  ctx->SwapReadOnlyList();  // the capacity back to the thread
  for (const c10::IValue& v : fn.outputs().empty() ? ctx->written : fn.outputs()) {
    values->outputs.push_back(Snapshot(v, *values));
    values->bytes += ValueBytes(v);
  }
  values->snapshot_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();
  MarkDeviceReady(*values);
  parity_call* call = ctx->call;
  ctx->call = nullptr;
  const parity_values v = MakeParityValues(std::move(values));
  parity_call_capture(call, &v);
}

// Logged at most every 30 s: a failing op may run thousands of times a second.
void LogCaptureFailure(const at::RecordFunction& fn, const char* what) {
  static std::atomic<int64_t> next_ns{0};
  static std::atomic<uint64_t> suppressed{0};
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t next = next_ns.load(std::memory_order_relaxed);
  if (now < next || !next_ns.compare_exchange_strong(next, now + int64_t{30'000'000'000})) {
    suppressed.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::string line = std::string("capture failed for ") + fn.name() + ": " + what + " (" +
                           std::to_string(suppressed.exchange(0)) + " more suppressed)";
  parity_log(PARITY_LOG_WARNING, line.c_str());
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

std::vector<std::string> RegisteredOpNames() {
  std::vector<std::string> names;
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) {
    names.push_back(op.name);
  }
  return names;
}

uint64_t InstallHook(parity_session* session) {
  g_signatures.store(parity_session_wants_signatures(session) != 0, std::memory_order_relaxed);
  g_session.store(session, std::memory_order_release);
  return at::addGlobalCallback(
      at::RecordFunctionCallback(&OnEnter, &OnExit)
          .needsInputs(true)
          .needsOutputs(true)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                   at::RecordScope::USER_SCOPE}));
}

void RemoveHook(uint64_t handle) {
  if (handle != 0) at::removeCallback(handle);
  g_session.store(nullptr, std::memory_order_release);
}

void MarkAgentThread() { State().depth = 1 << 20; }

void SetPendingApi(const char* api) { State().pending_api = api; }

void PushModuleScope(const std::string& path) { State().modules.push_back(path); }
void PopModuleScope() {
  if (!State().modules.empty()) State().modules.pop_back();
}

}  // namespace parity::agent
