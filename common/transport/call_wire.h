// A call's identity (common/wire/call_identity.h) to and from its ApiCall: the one place that
// names the fields of both. The payload fields (inputs, outputs, kept blobs, inputs written,
// unchecked writes) are the codec's and the agent's encoder's, not the identity's.
#pragma once

#include "common/wire/call_identity.h"
#include "parity/v1/parity.pb.h"

namespace parity::common {

// Moves `id`'s fields into `out` (its payload fields untouched).
void IdentityToWire(CallIdentity&& id, v1::ApiCall* out);
CallIdentity IdentityFromWire(const v1::ApiCall& call);

}  // namespace parity::common
