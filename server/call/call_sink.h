// Where a worker hands a call to be checked: the check pipeline (server/check/call_pipeline.h)
// in a server, a stand-in where the replay is replaced (parity-server --replay=false, the
// transport's benchmarks, tests). The service is given one and calls it directly: one virtual
// call between the worker's step (StreamSession::RunCall) and the pipeline.
#pragma once

#include "server/call/call_origin.h"
#include "server/call/call_outcome.h"
#include "server/call/server_call.h"

namespace parity::common {
class BlobSource;
}  // namespace parity::common

namespace parity::server {

class CallSink {
 public:
  virtual ~CallSink() = default;
  // Checks one call on a worker thread and returns what was decided: rows, metrics and error
  // data are the sink's; the verdict is encoded from the outcome by the caller. Must not throw.
  virtual CallOutcome Run(const CallOrigin& origin, const ServerCall& call,
                          const common::BlobSource& blobs) = 0;
};

}  // namespace parity::server
