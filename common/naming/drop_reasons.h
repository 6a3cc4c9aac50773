// Why an agent never sent a call: one list for both sides, X(name, enumerator, why). It makes the
// agent's DropReason enum and its names, parity_counters' dropped_<name> fields (parity/
// transport.h), AgentStats.dropped_calls' keys (parity.proto), the reasons the agent's exit line
// explains, and the server's `reason` label of parity_server_agent_dropped_calls_total (which
// adds lost_in_flight and other). docs/troubleshooting.md#why-a-call-was-not-checked is the same
// table in words, checked against this one (tests/agent/counters_test.cc). No dependencies:
// either half of the agent includes it.
#pragma once

// clang-format off
#define PARITY_DROP_REASONS(X)                                                                  \
  X(queue_full, kQueueFull,                                                                     \
    "the server fell behind the training (policy drop, or a block wait of "                    \
    "parity.block_timeout_ms ran out)")                                                         \
  X(disconnected, kDisconnected,                                                                \
    "no server was connected (the queue was full, or the session ended, before one was)")       \
  X(stopped, kStopped,                                                                          \
    "still queued for a connected server when the session ended (flush_timeout_ms ran out)")    \
  X(communication, kCommunication, "communication ops: their results depend on the other ranks")
// clang-format on

#define PARITY_DROP_REASON_COUNT_(name, enumerator, why) +1
// How many reasons PARITY_DROP_REASONS lists.
#define PARITY_DROP_REASON_COUNT (0 PARITY_DROP_REASONS(PARITY_DROP_REASON_COUNT_))
