#include "common/transport/replica_rules.h"

#include "absl/strings/str_cat.h"
#include "common/base/text.h"

namespace parity::common {

absl::Status CheckReplicaReport(const v1::ReplicaReport& in, int32_t rank) {
  if (in.group_size() == 0) return absl::InvalidArgumentError("ReplicaReport.group is empty");
  if (static_cast<std::size_t>(in.group_size()) > kMaxReplicaGroup) {
    return absl::ResourceExhaustedError(absl::StrCat("ReplicaReport.group: ", in.group_size(),
                                                     " ranks, at most ", kMaxReplicaGroup));
  }
  if (static_cast<std::size_t>(in.digests_size()) > kMaxReplicaDigests) {
    return absl::ResourceExhaustedError(absl::StrCat("ReplicaReport.digests: ", in.digests_size(),
                                                     ", at most ", kMaxReplicaDigests));
  }
  bool member = false;
  for (int i = 0; i < in.group_size(); ++i) {
    if (in.group(i) < 0 || (i > 0 && in.group(i) <= in.group(i - 1))) {
      return absl::InvalidArgumentError(
          "ReplicaReport.group: global ranks, not negative, each once, ascending");
    }
    member |= in.group(i) == rank;
  }
  if (!member) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReplicaReport.group does not hold this stream's rank ", rank));
  }
  if (in.kind() != "gradients" && in.kind() != "parameters" && in.kind() != "collective") {
    return absl::InvalidArgumentError(
        absl::StrCat("ReplicaReport.kind: \"", EscapeControl(in.kind().substr(0, 64)),
                     "\" is none of gradients, parameters, collective"));
  }
  if (in.algorithm() != "crc32c" && in.algorithm() != "poly64") {
    return absl::InvalidArgumentError(absl::StrCat("ReplicaReport.algorithm: \"",
                                                   EscapeControl(in.algorithm().substr(0, 64)),
                                                   "\" is neither crc32c nor poly64"));
  }
  if (in.op().empty() || in.op().size() > kMaxReplicaNameBytes ||
      EscapeControl(in.op()) != in.op()) {
    return absl::InvalidArgumentError(absl::StrCat("ReplicaReport.op: 1 to ", kMaxReplicaNameBytes,
                                                   " bytes without control characters"));
  }
  if (in.step() < 0) return absl::InvalidArgumentError("ReplicaReport.step is negative");
  for (const v1::ReplicaDigest& d : in.digests()) {
    if (d.name().size() > kMaxReplicaNameBytes || EscapeControl(d.name()) != d.name()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ReplicaDigest.name: at most ", kMaxReplicaNameBytes, " bytes, no control characters"));
    }
  }
  return absl::OkStatus();
}

}  // namespace parity::common
