// The RecordFunction hook: keeps the top-level operator of each call, copies its inputs at entry
// and its outputs at exit, and hands the call to a CaptureSink (the session). It runs on
// training threads, so it does only what must happen there: name (through the sink), snapshot,
// hand over. Encoding and I/O happen on the sender's thread. No exception leaves its callbacks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/torch/torch_pch.h"
#include "parity/v1/parity.pb.h"

namespace parity::agent {

// A call captured on a training thread, waiting for the sender: metadata plus snapshots.
struct CapturedCall {
  v1::ApiCall meta;  // every field but inputs/outputs
  std::vector<c10::IValue> inputs, outputs;
  uint64_t bytes = 0;
  double snapshot_seconds = 0;  // the training thread's time in this call's snapshot copies
  // Accelerator tensors are snapshotted on their device (an asynchronous device-side copy, so
  // the training thread never waits for the device); the sender waits for this event, recorded
  // on the training's stream after the last copy, then copies them to the host.
  std::optional<c10::Event> device_ready;
  std::optional<c10::Device> accelerator;  // the first accelerator among the snapshots
};

// What the hook knows of a top-level operator call when it enters.
struct CallSite {
  std::string op;         // "aten::gelu"
  std::string overload;   // "" for the default overload
  bool backward = false;  // run by the autograd engine inside a node
  std::string node;       // that node's name, e.g. "GeluBackward0"
  int64_t node_sequence_nr = -1;
  int64_t forward_sequence_nr = -1;  // the autograd sequence number current at entry
  bool in_optimizer = false;         // inside an optimizer's step()
  std::string module;                // the innermost module path, or ""
  c10::ArrayRef<const c10::IValue> inputs;
};

// The session as the hook needs it: one narrow interface, called on training threads.
// Implementations are thread-safe.
class CaptureSink {
 public:
  virtual ~CaptureSink() = default;
  // Names the call and decides whether to capture it: fills `meta` (step, call index, phase,
  // forward link, module, optimizer) and returns true to capture. With a skip_reason set in
  // `meta` the call is sent without its values.
  virtual bool Begin(const CallSite& site, v1::ApiCall* meta) = 0;
  // Whether a call whose values take about `bytes` may be copied now (counts the drop if not).
  virtual bool Admit(uint64_t bytes) = 0;
  // Takes a captured call (its sequence number is the sink's to set).
  virtual void Capture(std::unique_ptr<CapturedCall> call) = 0;
  // An optimizer's step() ended.
  virtual void OptimizerStepDone() = 0;
};

// Sends every top-level call to `sink` until RemoveHook(handle). One sink at a time.
uint64_t InstallHook(CaptureSink* sink);
void RemoveHook(uint64_t handle);
// Keeps at most `max_cached_bytes` of free host snapshot buffers for reuse; 0 turns the pool off
// (every copy allocates). Takes effect for the next copies.
void ConfigureSnapshotPool(uint64_t max_cached_bytes);
// Marks the calling thread as the agent's own: its ops are never captured.
void MarkAgentThread();
// The module scope stack of the calling thread (results name module paths).
void PushModuleScope(const std::string& path);
void PopModuleScope();
// `v` with every accelerator tensor copied to the host (lists and tuples included).
c10::IValue ToHost(const c10::IValue& v);
// Every operator the dispatcher knows now ("aten::add", "npu::npu_rms_norm").
std::vector<std::string> RegisteredOpNames();

}  // namespace parity::agent
