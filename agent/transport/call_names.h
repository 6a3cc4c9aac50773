// What names a captured call within its training step: the step counter, each op's call index in
// the step, and the links from autograd nodes to the forward call that created them (so a
// backward call is named after its forward call: common/naming/naming.h). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace parity::agent {

class CallNames {
 public:
  struct Forward {
    std::string op, overload;
    uint64_t call_index = 0;
    uint32_t backward_calls = 0;  // backward calls linked to it so far
    std::string module;           // the module it ran in: its backward calls are attributed there
    std::string api;              // msprobe's API from the call site ("Tensor.add"), or ""
    uint64_t api_index = 0;       // with `api`: its index among that API's calls in the step
  };

  // A forward call as its call site names it (viewed, not copied: RecordForward copies it into a
  // link whose buffers are reused from step to step).
  struct ForwardSite {
    absl::string_view op, overload;
    uint64_t call_index = 0;
    absl::string_view module, api;
    uint64_t api_index = 0;
  };

  int64_t step() const { return step_.load(std::memory_order_relaxed); }
  // Ends the step: call indices and forward links start afresh.
  void NewStep();
  // The step counter becomes `step` (the next NewStep() ends it).
  void SetStep(int64_t step) { step_.store(step, std::memory_order_relaxed); }

  // The call index of the next call of `op` in this step (0, 1, ...); also of an msprobe API
  // ("Tensor.add": its calls are counted apart from any operator's).
  uint64_t NextCallIndex(const std::string& op);
  // A forward call at autograd sequence number `sequence_nr`: it owns the nodes created from
  // that number until the next forward call's.
  void RecordForward(int64_t sequence_nr, const ForwardSite& call);
  // The forward call whose nodes include `sequence_nr` (false if none), assigned to `call` (its
  // string buffers reused); counts the link, so `call->backward_calls` is how many backward
  // calls were linked to it before this one.
  bool LinkBackward(int64_t sequence_nr, Forward* call);

 private:
  std::atomic<int64_t> step_{0};
  absl::Mutex mu_;
  std::unordered_map<std::string, uint64_t> call_index_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Forward> forward_by_seq_ ABSL_GUARDED_BY(mu_);
  // The links of steps gone, kept for the next ones (their map nodes and string buffers): a step
  // like the last records its forward calls without allocating. At most kMaxSpareLinks.
  std::vector<std::map<int64_t, Forward>::node_type> spare_ ABSL_GUARDED_BY(mu_);
};

}  // namespace parity::agent
