#include "agent/transport/check_stream.h"

#include <exception>

#include "absl/strings/str_cat.h"

#include "agent/transport/thread_priority.h"
#include "common/base/log.h"
#include "common/transport/wire.h"

namespace parity::agent {

CheckStream::CheckStream(std::shared_ptr<grpc::ChannelInterface> channel, OnMessage on_message,
                         std::function<void()> on_end, int background_nice)
    : on_message_(std::move(on_message)),
      on_end_(std::move(on_end)),
      background_nice_(background_nice) {
  grpc::GenericStub stub(std::move(channel));
  stub.PrepareBidiStreamingCall(&context_, common::kCheckMethod, grpc::StubOptions(), this);
  AddHold();  // before the call starts: released once no operation starts from outside
  StartRead(&in_);
  StartCall();
}

void CheckStream::ReleaseHold() {
  {
    absl::MutexLock lock(&mu_);
    if (!held_) return;
    held_ = false;  // under the lock: no Write, WritesDone or AwaitFirst starts anything now
  }
  RemoveHold();
}

CheckStream::~CheckStream() {
  {
    absl::MutexLock lock(&mu_);
    if (!done_) context_.TryCancel();
  }
  ReleaseHold();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));  // gRPC's last callback has run: nothing touches us now
}

bool CheckStream::Write(grpc::ByteBuffer message, bool more) {
  absl::MutexLock lock(&mu_);
  auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queued_.has_value() || done_ || write_failed_ || cancelled_ || !held_;
  };
  if (!room()) {
    ++waiting_writes_;
    mu_.Await(absl::Condition(&room));
    --waiting_writes_;
  }
  if (done_ || write_failed_ || writes_done_ || cancelled_ || !held_) return false;
  queued_.emplace(std::move(message), more);
  if (!writing_) StartNextWriteLocked();
  return true;
}

void CheckStream::StartNextWriteLocked() {
  out_ = std::move(queued_->first);
  const bool more = queued_->second;
  queued_.reset();
  writing_ = true;
  // Starting an operation under our own lock is safe: gRPC never calls a reaction inline from
  // StartWrite.
  StartWrite(&out_, common::WriteOptionsFor(more));
}

void CheckStream::OnWriteDone(bool ok) {
  LowerThisThreadOnce(background_nice_);
  absl::MutexLock lock(&mu_);
  writing_ = false;
  out_.Clear();
  if (!ok) write_failed_ = true;  // the stream is ending: OnDone follows
  if (write_failed_ || cancelled_) {
    queued_.reset();  // accepted, never sent: the caller counts it lost with the stream
    return;
  }
  if (queued_.has_value()) {
    StartNextWriteLocked();
  } else if (writes_done_) {
    StartWritesDone();
  }
}

std::optional<grpc::ByteBuffer> CheckStream::AwaitFirst() {
  absl::MutexLock lock(&mu_);
  auto arrived = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return first_.has_value() || reading_ended_;
  };
  mu_.Await(absl::Condition(&arrived));
  first_taken_ = true;
  if (!first_.has_value()) return std::nullopt;
  std::optional<grpc::ByteBuffer> first = std::move(first_);
  first_.reset();
  if (held_) StartRead(&in_);  // the reads held back until the first was taken
  return first;
}

void CheckStream::OnReadDone(bool ok) {
  LowerThisThreadOnce(background_nice_);
  if (!ok) {
    {
      absl::MutexLock lock(&mu_);
      reading_ended_ = true;
    }
    ReleaseHold();  // the stream is ending: let gRPC finish it
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (!first_taken_) {
      first_ = std::move(in_);  // AwaitFirst takes it and starts the next read
      in_ = grpc::ByteBuffer();
      return;
    }
  }
  try {
    on_message_(in_);
  } catch (const std::exception& e) {
    common::LogError(absl::StrCat("reading the server's messages: ", e.what(), "; stream ends"));
    context_.TryCancel();
  } catch (...) {
    common::LogError("reading the server's messages: unknown exception; stream ends");
    context_.TryCancel();
  }
  in_.Clear();
  StartRead(&in_);
}

void CheckStream::WritesDone() {
  {
    absl::MutexLock lock(&mu_);
    if (writes_done_ || done_ || !held_) return;
    writes_done_ = true;
    // With a write in flight or queued, OnWriteDone half-closes after the last one.
    if (!writing_ && !queued_.has_value() && !write_failed_) StartWritesDone();
  }
  ReleaseHold();  // nothing more starts from outside: the reactions finish the rest
}

grpc::Status CheckStream::Finish(absl::Duration timeout) {
  ReleaseHold();
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
    context_.TryCancel();
    mu_.Await(absl::Condition(&done_));
  }
  return status_;
}

void CheckStream::Cancel() {
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }
  context_.TryCancel();
  ReleaseHold();
}

bool CheckStream::WriteWaitingForTesting() const {
  absl::MutexLock lock(&mu_);
  return waiting_writes_ > 0;
}

bool CheckStream::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

void CheckStream::OnDone(const grpc::Status& status) {
  if (on_end_) {
    try {
      on_end_();
    } catch (...) {  // nothing may escape a reaction
    }
  }
  absl::MutexLock lock(&mu_);  // the last touch: the destructor may run once this is released
  status_ = status;
  done_ = true;
  reading_ended_ = true;
}

std::string CheckStream::PeerCertificatePem() const {
  std::shared_ptr<const grpc::AuthContext> auth = context_.auth_context();
  if (!auth) return "";
  for (const grpc::string_ref& pem : auth->FindPropertyValues("x509_pem_cert")) {
    return std::string(pem.data(), pem.size());
  }
  return "";
}

}  // namespace parity::agent
