// The messages of one Check stream in the order they must go out: a verdict for every call in
// the order the calls arrived, whatever order the workers finish them in. Not thread-safe: the
// stream's reactor holds its lock around every call.
#pragma once

#include <grpcpp/support/byte_buffer.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>

namespace parity::server {

class OrderedOutbox {
 public:
  using Clock = std::chrono::steady_clock;

  // A message that goes out after everything queued so far, alone (the ServerInfo).
  void Push(grpc::ByteBuffer message);

  // From now on, verdicts ready together when a write starts go out as one VerdictBatch of at
  // most `max_items` verdicts and `max_bytes` bytes (for an agent whose Hello says it takes
  // them). A verdict larger than `max_bytes` goes alone. With a `hold`, ready verdicts wait for
  // company while later calls of the stream are still being checked: until a batch is full, or
  // `hold` after the first of them was ready, whichever comes first. Without later calls (the
  // stream's last verdicts, a worker that keeps up) or once the stream stops, nothing waits.
  void BatchVerdicts(std::size_t max_items, std::size_t max_bytes,
                     Clock::duration hold = Clock::duration::zero()) {
    max_batch_items_ = max_items;
    max_batch_bytes_ = max_bytes;
    hold_ = hold;
  }

  // The slot of the next call, in arrival order.
  uint64_t Reserve() { return next_slot_++; }

  // Call `slot` is done: its verdict (a serialized ServerMessage holding it), or nothing when its
  // message did not parse. Verdicts are
  // released in slot order; at an empty slot the stream stops: nothing from it or after it goes
  // out (the stream ends there, with the error).
  void Complete(uint64_t slot, std::optional<grpc::ByteBuffer> message,
                Clock::time_point now = Clock::now());

  // Takes the next message to write when none is being written: true and `*out` filled (one
  // message, or a VerdictBatch of those ready), with `*more` telling whether another goes right
  // behind it (a buffer hint lets gRPC send them together; never when what is left is held).
  // Verdicts held for company (BatchVerdicts' hold) are not taken: false, and `*held_until`
  // (when given) set to the time they go out unless a batch fills first; call again then.
  bool StartWrite(Clock::time_point now, grpc::ByteBuffer* out, bool* more,
                  std::optional<Clock::time_point>* held_until);
  bool StartWrite(grpc::ByteBuffer* out, bool* more) {
    return StartWrite(Clock::now(), out, more, nullptr);
  }
  // The write started by StartWrite ended; after a failed one (the client is gone) nothing more
  // is written.
  void WriteDone(bool ok);

  bool writing() const { return writing_; }
  // Bytes of the messages completed but not yet handed to a write (ready, or held back behind a
  // slot still being checked).
  std::size_t unsent_bytes() const { return unsent_bytes_; }
  // Whether every reserved call has completed (its verdict released, written or not).
  bool drained() const { return next_to_release_ == next_slot_; }

 private:
  // The next write: how many ready messages it takes (0 or 1: the front alone), or, when they
  // wait for company, until when.
  struct Plan {
    std::size_t count = 0;
    std::optional<Clock::time_point> held_until;
  };
  Plan PlanWrite(Clock::time_point now) const;

  struct Ready {
    grpc::ByteBuffer message;
    bool verdict = false;     // may go in a VerdictBatch
    Clock::time_point since;  // when it was ready
  };
  std::deque<Ready> ready_;                                        // in order, not yet written
  std::map<uint64_t, std::optional<grpc::ByteBuffer>> completed_;  // out of order, held back
  std::size_t unsent_bytes_ = 0;
  uint64_t next_slot_ = 0;
  uint64_t next_to_release_ = 0;
  bool writing_ = false;
  bool failed_ = false;              // a write failed: the client is gone
  bool stopped_ = false;             // an empty slot was released: nothing more goes out
  std::size_t max_batch_items_ = 1;  // 1: every message alone
  std::size_t max_batch_bytes_ = 0;
  Clock::duration hold_ = Clock::duration::zero();  // zero: verdicts never wait for company
};

}  // namespace parity::server
