// One agent's Check stream on the server (private to server/service/). Reactions read messages,
// validate them, reassemble chunked tensors and queue calls; workers check the calls; verdicts
// go out in the order the calls arrived (OrderedOutbox).
//
// Threads and ownership: gRPC runs the reactions, one read at a time, so the reading side's
// state below is touched by one thread at a time without a lock. Workers deliver verdicts and
// admit parked calls on their own threads: everything both sides touch is guarded by mu_, and
// each action (read, write, finish) is decided under it and started after releasing it, as the
// last thing that thread does with the reactor. gRPC calls OnDone only after Finish(), and
// Finish is called only when no read, write, queued call, parked call or alarm remains, so the
// reactor deletes itself in OnDone with nothing left that could touch it.
#pragma once

#include <grpcpp/alarm.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/service/blob_assembler.h"
#include "server/service/check_service.h"
#include "server/service/ordered_outbox.h"

namespace parity::server {

class CheckService::Reactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  Reactor(CheckService* service, std::string peer, uint64_t session);

  void Begin();                             // starts reading
  void Refuse(const grpc::Status& status);  // finishes at once (over max_streams)

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override {}
  void OnDone() override;

 private:
  // ---- the reading side: reactions only -----------------------------------------------------
  absl::Status Handle();  // one message read into in_
  // One message, alone or an item of a MessageBatch (`in_batch`): its bytes may be moved out.
  absl::Status HandleMessage(grpc::ByteBuffer& bytes, bool in_batch);
  absl::Status HandleBatch(grpc::ByteBuffer& bytes);  // each item as if it had come alone
  // A parsed message routed by its kind (the table in HandleParsed): one handler a kind.
  absl::Status HandleParsed(v1::AgentMessage& m, bool in_batch);
  absl::Status RouteHello(v1::AgentMessage& m);
  absl::Status RouteCall(v1::AgentMessage& m);
  absl::Status RouteChunk(v1::AgentMessage& m);
  absl::Status RouteStats(v1::AgentMessage& m);
  absl::Status RouteGoodbye(v1::AgentMessage& m);
  absl::Status RouteRelease(v1::AgentMessage& m);
  absl::Status OnHello(const v1::Hello& hello);
  void OnStats(const v1::AgentStats& stats);
  // One call: `raw` (parsed later by the worker) or `call` (already parsed). `sequence` is
  // unknown for bytes that do not parse (the worker reports them).
  absl::Status OnCall(std::optional<uint64_t> sequence, std::shared_ptr<grpc::ByteBuffer> raw,
                      std::shared_ptr<v1::ApiCall> call, std::vector<uint64_t> kept_blob_ids);
  absl::Status AdmitSequence(std::optional<uint64_t> sequence);  // increasing, above 0
  void Run(uint64_t slot, uint64_t message, std::shared_ptr<grpc::ByteBuffer> raw,
           std::shared_ptr<v1::ApiCall> call, std::shared_ptr<BlobStore> blobs);

  // ---- both sides ---------------------------------------------------------------------------
  void Resume();  // a worker admitted this stream's parked call
  // Call `slot` is done: its verdict, or none with `error` (its message did not parse, or the
  // server ran out of memory), which ends the stream after the verdicts before it.
  void Deliver(uint64_t slot, std::optional<grpc::ByteBuffer> verdict, const absl::Status& error);
  void ReleaseHold() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnAlarm();  // the hold on ready verdicts (ServiceOptions.verdict_hold) ended
  void EndReading(const absl::Status& error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decides the next actions under mu_, releases it, then starts them.
  void ActAndUnlock() ABSL_UNLOCK_FUNCTION(mu_);

  CheckService* const service_;
  const std::string peer_;
  const uint64_t session_;
  bool refused_ = false;  // set before gRPC sees the reactor

  // Reading side (reactions, serialised by gRPC).
  grpc::ByteBuffer in_;
  uint64_t messages_ = 0;  // messages read before in_
  bool hello_ = false;
  CallOrigin origin_;    // set at Hello, read by workers later (the work queue orders the accesses)
  BlobAssembler blobs_;  // chunked tensors and kept blobs (server/service/blob_assembler.h)
  uint64_t last_sequence_ = 0;
  std::string agent_;  // the agent across its streams: Hello's run_id, hostname, pid, rank

  absl::Mutex mu_;
  OrderedOutbox outbox_ ABSL_GUARDED_BY(mu_);
  // The message being written: filled under mu_ when a write starts (OrderedOutbox allows one
  // at a time), then gRPC's until OnWriteDone.
  grpc::ByteBuffer out_;
  // The read side: no read outstanding (kIdle), the next one to start (kWanted: the last
  // message's holds are released), one outstanding (kReading). reads_done_: none after it (end of
  // stream or an error); an outstanding read is then discarded when it completes.
  enum class Read { kIdle, kWanted, kReading };
  Read read_ ABSL_GUARDED_BY(mu_) = Read::kIdle;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  // Holds on the next read: the reaction handling a message, and a call parked in the full
  // work queue (released when a worker admits it).
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  // Ready verdicts held for company (OrderedOutbox::BatchVerdicts) are written when this alarm
  // fires, unless a write takes them first. One at a time; the stream does not finish while one
  // is set, so its callback never outlives the reactor.
  // kCancelled: nothing is held any more (every call's verdict is out or going); its callback
  // still runs, at once, before the stream may finish. kNone again once the callback ran.
  enum class Alarm { kNone, kSet, kCancelled };
  std::unique_ptr<grpc::Alarm> alarm_ ABSL_GUARDED_BY(mu_);
  Alarm alarm_state_ ABSL_GUARDED_BY(mu_) = Alarm::kNone;
  absl::Status error_ ABSL_GUARDED_BY(mu_);                    // the stream's end status
  std::string who_ ABSL_GUARDED_BY(mu_) = "before its Hello";  // for logs
};

}  // namespace parity::server
