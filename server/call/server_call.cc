#include "server/call/server_call.h"

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/naming/api_names.h"
#include "common/naming/naming.h"
#include "common/naming/operator_catalogue.h"
#include "common/transport/call_wire.h"
#include "parity/v1/parity.pb.h"

namespace parity::server {
namespace {

constexpr std::size_t kMaxCachedOperators = 4096;

std::shared_ptr<const OperatorTraits> Resolve(absl::string_view op_name) {
  auto traits = std::make_shared<OperatorTraits>();
  traits->op_name = std::string(op_name);
  const common::OperatorClass c = common::ClassifyOp(op_name);
  if (c.never_replayed != nullptr) {
    traits->skip_reason = common::NeverReplayedReason(op_name, *c.never_replayed);
  }
  traits->random_family = c.random_family;
  return traits;
}

class TraitsCache {
 public:
  std::shared_ptr<const OperatorTraits> Of(absl::string_view op_name) {
    {
      absl::ReaderMutexLock lock(&mu_);
      if (auto it = traits_.find(op_name); it != traits_.end()) return it->second;
    }
    std::shared_ptr<const OperatorTraits> traits = Resolve(op_name);
    absl::MutexLock lock(&mu_);
    if (traits_.size() >= kMaxCachedOperators) return traits;
    return traits_.try_emplace(traits->op_name, traits).first->second;
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const OperatorTraits>> traits_
      ABSL_GUARDED_BY(mu_);
};

CallNames NamesOf(const v1::ApiCall& call) {
  CallNames n;
  n.api = common::ApiName(call);
  if (!call.forward_op_name().empty()) n.forward_api = common::ForwardApiName(call);
  n.csv_api = common::MsprobeCsvName(call);
  n.msprobe = common::MsprobeName(call);
  if (!n.msprobe.empty()) {
    n.msprobe_api = !call.api().empty() ? call.api()
                    : call.forward_op_name().empty()
                        ? common::MsprobeApi(call.op_name(), call.overload())
                        : common::MsprobeApi(call.forward_op_name(), call.forward_overload());
  }
  return n;
}

}  // namespace

absl::string_view OperatorTraits::bare() const { return common::BareOpName(op_name); }

std::shared_ptr<const OperatorTraits> OperatorTraitsOf(absl::string_view op_name) {
  static TraitsCache* cache = new TraitsCache();  // never destroyed: workers may outlive main
  return cache->Of(op_name);
}

ServerCall::ServerCall(const v1::ApiCall& call, std::string training_framework)
    : message(call),
      id(common::IdentityFromWire(call)),
      framework(std::move(training_framework)),
      op(OperatorTraitsOf(call.op_name())),
      names(NamesOf(call)),
      input_count(call.inputs_size()) {
  for (const std::string& note : call.unchecked_writes()) {  // as many as a verdict carries
    if (unchecked_writes.size() == kMaxUncheckedWrites) break;
    unchecked_writes.push_back(note.substr(0, kMaxUncheckedWriteBytes));
  }
  for (const v1::InputWritten& w : call.inputs_written()) {
    inputs_written.push_back({w.index(), w.name(), w.changed_elements(), w.elements()});
  }
}

std::string ServerCall::DataName() const {
  if (id.backward() && !id.forward_op_name.empty()) return names.api;
  return absl::StrCat(names.api, id.backward() ? ".backward" : ".forward");
}

}  // namespace parity::server
