#include "tests/testing/generic_stream.h"

#include <utility>

namespace parity::testing {

void GenericStreamReactor::OnReadDone(bool ok) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ok) {
      reading_ = false;
      MaybeFinishLocked();
      return;
    }
    OnMessage(in_);
    WriteNextLocked();
  }
  StartRead(&in_);
}

void GenericStreamReactor::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  writing_ = false;
  if (ok) WriteNextLocked();
  MaybeFinishLocked();
}

void GenericStreamReactor::WriteNextLocked() {
  if (writing_) return;
  std::optional<grpc::ByteBuffer> next = NextWrite();
  if (!next) return;
  out_ = std::move(*next);
  writing_ = true;
  StartWrite(&out_);
}

void GenericStreamReactor::MaybeFinishLocked() {
  if (!reading_ && !writing_ && !finished_) {
    finished_ = true;
    Finish(grpc::Status::OK);
  }
}

}  // namespace parity::testing
