/* Parity's transport library (libparity_transport.so): everything of the agent that needs no
 * torch, behind a C API. The agent's torch half (libparity_agent.so: the RecordFunction hook, the
 * snapshots, the value encoder) is compiled against the training's own torch, with that torch's
 * compiler flags and C++ ABI, and talks to this library only through the functions below: plain
 * C types, byte buffers and function pointers, so either half can be rebuilt without the other,
 * and a pre-C++11-ABI torch runs beside a transport built with the distribution's gRPC.
 *
 * What lives here: the configuration (msprobe's config.json, validated), the session (steps,
 * filters, call names, the per-signature budget, fail_fast), the counters, the bounded queue
 * and its drop/block policy, and the transport proper (the Check stream, TLS, batching, payload
 * reuse, reconnect with back-off). docs/design.md#two-halves draws the line.
 *
 * Versioning: PARITY_TRANSPORT_ABI is raised for any incompatible change; every struct the
 * caller passes starts with its own size (`size`), so fields added at the end stay compatible.
 * A torch half refuses a transport whose parity_transport_abi() differs from the ABI it was
 * compiled with.
 *
 * Threads: every function is thread-safe unless it says otherwise. Nothing here throws or
 * aborts: failures are logged (parity_log's sink) and returned. */
#ifndef PARITY_TRANSPORT_H_
#define PARITY_TRANSPORT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PARITY_TRANSPORT_API __attribute__((visibility("default")))
#define PARITY_TRANSPORT_ABI 1

PARITY_TRANSPORT_API uint32_t parity_transport_abi(void);
/* "0.1.0 (transport, gRPC 1.51.1, protobuf 3.21.12)" */
PARITY_TRANSPORT_API const char* parity_transport_version(void);

/* ---- logging ---------------------------------------------------------------------------- */
enum { PARITY_LOG_DEBUG = 0, PARITY_LOG_INFO = 1, PARITY_LOG_WARNING = 2, PARITY_LOG_ERROR = 3 };
/* One line on stderr, "[parity-agent] W ...", under the configured log level. */
PARITY_TRANSPORT_API void parity_log(int level, const char* message);

/* ---- configuration ---------------------------------------------------------------------- */
/* The agent's configuration keys as JSON ([{"path": "tensor.host", "kind": "string", "doc":
 * ..., "default": ...}, ...]; "default": the effective value of a config with nothing set, "" if
 * none); a static string. */
PARITY_TRANSPORT_API const char* parity_config_keys_json(void);
/* Whether a config.json text would make a session, by the same reader and the same checks
 * (its TLS files, its operator catalogue) with the same words: 1 if so; else 0 with every
 * problem in `error` (error_size bytes, NUL-terminated). `source` names the text in messages
 * (its path). Starts nothing, connects nowhere; warnings (unknown keys) are logged. */
PARITY_TRANSPORT_API int parity_config_check(const char* config_json, const char* source,
                                             char* error, size_t error_size);

/* ---- the session ------------------------------------------------------------------------ */
typedef struct parity_session parity_session;

/* What the session asks of the process it runs in (the torch half). Every callback may be
 * null. set_capture runs with the session's lock held (from start, stop, step and close): it
 * must not call back into the session; the others run without it. */
typedef struct parity_host {
  uint32_t size; /* sizeof(parity_host) */
  void* ctx;
  const char* framework_version; /* "torch 2.1.0": Hello.framework_version */
  const char* device_type;       /* "npu", "cuda", "cpu": Hello.device_type */
  /* Capture on (install the hook) or off. `snapshot_pool_bytes`: parity.snapshot_pool_bytes. */
  void (*set_capture)(void* ctx, int on, uint64_t snapshot_pool_bytes);
  /* Every operator registered now, one name a line ("aten::add\nnpu::npu_rms_norm\n"), in a
   * buffer released with free_text: names in the filters that select nothing are warned about. */
  char* (*registered_ops)(void* ctx);
  void (*free_text)(void* ctx, char* text);
  /* Runs first on each thread the library starts that calls back into the host (the sender,
   * which encodes values): the host's work there is never captured. */
  void (*enter_agent_thread)(void* ctx);
  /* Added in ABI 1 after `enter_agent_thread` (a host's older struct ends before it, read as 0):
   * PARITY_HOST_* bits. */
  uint32_t flags;
} parity_host;
/* The session connects when it captures its first call, not when it starts, and says nothing at
 * its end if it captured none: the zero-code agent of a process without RANK, which may be the
 * launcher of a spawned training (torch.multiprocessing.spawn, torchrun) and run no operator. */
#define PARITY_HOST_CONNECT_AT_FIRST_CALL 1u

/* A session from the text of a config.json (msprobe's keys, and Parity's "parity" section), or
 * from the file at `config_path` (config_json null). Null on a configuration error, with the
 * message in `error` (error_size bytes, NUL-terminated). Warnings (unknown keys) are logged.
 * The session captures nothing until parity_session_start. */
PARITY_TRANSPORT_API parity_session* parity_session_create(const char* config_json,
                                                           const char* config_path,
                                                           const parity_host* host, char* error,
                                                           size_t error_size);
/* Begins (first call: connects in the background) or resumes capture. */
PARITY_TRANSPORT_API void parity_session_start(parity_session* s);
/* Pauses capture; returns at once. */
PARITY_TRANSPORT_API void parity_session_stop(parity_session* s);
/* Ends a training step. 0 under parity.fail_fast once an error verdict has arrived (its text in
 * `error`, may be null), else 1. */
PARITY_TRANSPORT_API int parity_session_step(parity_session* s, char* error, size_t error_size);
/* Sets the current step (msprobe's set_init_step, or steps counted before the first start):
 * call indices start afresh, the step selection and the last configured step apply to it. */
PARITY_TRANSPORT_API void parity_session_set_step(parity_session* s, int64_t step);
/* msprobe's forward_backward_dump_end(): forward calls are no longer captured, backward calls
 * (the autograd engine's, of the loss.backward() that follows) still are, until the next
 * parity_session_stop or parity_session_start. */
PARITY_TRANSPORT_API void parity_session_end_forward(parity_session* s);
/* Steps come only from parity_session_step from now on. */
PARITY_TRANSPORT_API void parity_session_use_explicit_steps(parity_session* s);
/* An optimizer's step() ended (ends a training step until explicit steps are used). */
PARITY_TRANSPORT_API void parity_session_optimizer_step_done(parity_session* s);
/* A torch.compile region began running on a training thread (forward: dynamo's compiled frame or
 * AOT autograd's CompiledFunction; backward: its CompiledFunctionBackward node). Counted for the
 * exit line: inductor's fused kernels inside run outside the dispatcher and are not checked. */
PARITY_TRANSPORT_API void parity_session_compiled_region(parity_session* s, int32_t backward);
/* A training's own autograd.Function began its forward (`name`: its class; `sequence_nr`: the
 * sequence number its backward node takes; `module`: the innermost module path or ""). The calls
 * that node's backward runs are named after it (ApiCall.forward_op_name "autograd::<name>", api
 * "Function.<name>"), not after the forward op that ran before it. */
PARITY_TRANSPORT_API void parity_session_custom_function(parity_session* s, const char* name,
                                                         int64_t sequence_nr, const char* module);
/* Waits until every captured call is delivered and answered, at most timeout_ms: 1 if so. */
PARITY_TRANSPORT_API int parity_session_flush(parity_session* s, uint32_t timeout_ms);
/* Delivers what is queued (at most parity.flush_timeout_ms), closes the stream, logs the summary.
 * Idempotent; capture stays off. */
PARITY_TRANSPORT_API void parity_session_close(parity_session* s);
/* Closes, then frees the session. No call of `s` may be running or follow. */
PARITY_TRANSPORT_API void parity_session_destroy(parity_session* s);
PARITY_TRANSPORT_API int parity_session_capturing(const parity_session* s);
PARITY_TRANSPORT_API int parity_session_ended(const parity_session* s);

typedef struct parity_counters {
  uint32_t size; /* set by the caller: sizeof(parity_counters) */
  uint64_t captured, sent, sent_bytes, reused_bytes;
  uint64_t dropped_queue_full, dropped_disconnected, dropped_stopped, dropped_communication;
  uint64_t lost_in_flight, unencodable, sampled_out, reconnects;
  uint64_t verdicts, pass, warning, error, skip, rejected, unreadable, queue_depth;
  double snapshot_seconds, encode_cpu_seconds, serialize_cpu_seconds;
  int64_t step;
  int32_t connected;
  /* Added in ABI 1 after `connected` (a caller's older struct ends before it): training threads'
   * time waiting for room in the queue under policy block. */
  double blocked_seconds;
  /* Added in ABI 1 after `blocked_seconds`: torch.compile regions run (forward, backward), and the
   * calls captured inside them (the aten operators inductor left to the dispatcher). */
  uint64_t compiled_forward, compiled_backward, compiled_calls;
  /* Added in ABI 1 after `compiled_calls`: replica reports sent, their verdicts by status, and
   * those never sent (docs/replicas.md). */
  uint64_t replica_reports, replica_pass, replica_error, replica_skip, replica_unsent;
} parity_counters;
PARITY_TRANSPORT_API void parity_session_counters(const parity_session* s, parity_counters* out);

/* ---- replicas (docs/replicas.md) ---------------------------------------------------------- */
/* A rank's digests of tensors every rank of `group` must hold alike (parity.v1.ReplicaReport):
 * the gradients an optimizer step reads, the parameters it wrote, a collective's outputs. */
typedef struct parity_replica_report {
  uint32_t size;        /* sizeof(parity_replica_report) */
  const int32_t* group; /* the process group's global ranks, ascending */
  size_t group_size;
  int64_t step;          /* negative: the session's current step */
  uint64_t sequence;     /* among the group's reports of this kind in the step, from 0 */
  const char* kind;      /* "gradients", "parameters", "collective" */
  const char* op;        /* "AdamW.step", "all_gather", ... */
  const char* algorithm; /* "crc32c", "poly64" */
  size_t count;          /* digests */
  const char* const* names;
  const uint64_t* digests;
  const uint64_t* bytes;
} parity_replica_report;
/* Queues the report to go out on the session's stream; 1 if queued, 0 if not (a rule of
 * ReplicaReport broken, such as a group without this rank or a name over 1,024 bytes: logged
 * with the reason; the session not started on a selected rank, ended, or too many reports
 * waiting: each counted replica_unsent). Never
 * waits. The server's ReplicaVerdict is counted (replica_pass, _error, _skip), an error logged
 * and, under parity.fail_fast, raised at the next step. */
PARITY_TRANSPORT_API int parity_session_report_replicas(parity_session* s,
                                                        const parity_replica_report* report);

/* ---- captured calls (training threads) -------------------------------------------------- */
typedef struct parity_call parity_call;

/* What the hook knows of a top-level operator call when it enters. */
typedef struct parity_call_site {
  uint32_t size;        /* sizeof(parity_call_site) */
  const char* op;       /* "aten::gelu" */
  const char* overload; /* "" for the default overload */
  int32_t backward;     /* run by the autograd engine inside a node */
  const char* node;     /* that node's name ("GeluBackward0"), or "" */
  int64_t node_sequence_nr;
  int64_t forward_sequence_nr; /* the autograd sequence number current at entry */
  int32_t in_optimizer;        /* inside an optimizer's step() */
  const char* module;          /* the innermost module path, or "" */
  /* The op, overload, dtypes and shapes ("aten::mm.|9:64,64,|9:64,64,"), for the per-signature
   * budget; only needed when parity_session_wants_signatures says so (else null). */
  const char* signature;
  /* The op's schema takes a communicator (a string argument named hcom or group...: torch_npu's
   * communication-fused ops, npu_mm_all_reduce_base and the like): its result depends on the
   * other ranks, so it is counted as communication and never copied. */
  int32_t communicates;
  /* Added in ABI 1 after `communicates` (a caller's older struct ends before it): msprobe's API
   * of the Python call that ran this top-level operator ("Functional.linear", "Tensor.add"), or
   * null when not known (ApiCall.api). */
  const char* api;
  /* Added in ABI 1 after `api`: the call ran inside a torch.compile region. */
  int32_t in_compiled_region;
} parity_call_site;

/* Whether call sites must carry a signature (parity.max_checks_per_signature is set). */
PARITY_TRANSPORT_API int parity_session_wants_signatures(const parity_session* s);

enum {
  PARITY_CALL_WITH_VALUES = 1, /* copy the values (else the call goes without: skip_reason) */
  PARITY_CALL_RANDOM = 2,      /* a random op: attach its generator's state */
  /* an op no catalogue lists as random (parity.detect_random): watch its generator; if the call
   * moved it, give the state read at entry with parity_call_set_generator (none: unknown) */
  PARITY_CALL_WATCH_GENERATOR = 4,
  /* parity.detect_input_writes: compare the call's read-only tensor arguments after the call
   * with their copies at entry (ApiCall.inputs_written, written by the values' encode) */
  PARITY_CALL_CHECK_INPUTS = 8
};
/* Names the call and decides whether to capture it. Null: not captured (filters, steps,
 * budget, a communication op). Otherwise the call is the caller's until captured or discarded;
 * `flags` says what to attach. */
PARITY_TRANSPORT_API parity_call* parity_call_begin(parity_session* s, const parity_call_site* site,
                                                    uint32_t* flags);
/* Whether a call whose values take about `bytes` may be copied now (counts the drop if not). */
PARITY_TRANSPORT_API int parity_session_admit(parity_session* s, uint64_t bytes);
/* The autocast dtype active at the call (parity.v1.DType). */
PARITY_TRANSPORT_API void parity_call_set_autocast_dtype(parity_call* c, int32_t dtype);
/* A random op's generator, read at entry (parity.v1.GeneratorState's fields). On a call given
 * PARITY_CALL_WATCH_GENERATOR: the call drew random numbers (ApiCall.drew_random) and this is
 * its generator's state at entry; state_size 0 when it could not be read. */
PARITY_TRANSPORT_API void parity_call_set_generator(parity_call* c, const char* device_type,
                                                    int32_t device_index, const void* state,
                                                    size_t state_size, const char* torch_version);

/* Where an encoder puts payloads too large to inline (parity.v1.TensorChunk blobs). */
typedef struct parity_blob_sink {
  void* ctx;
  /* A payload sent as a blob; the bytes are copied. Returns the blob id. */
  uint64_t (*add_blob)(void* ctx, const void* bytes, uint64_t size);
  /* A payload the connection may have sent before: an equal one is named again, not resent. */
  uint64_t (*add_reusable)(void* ctx, const void* bytes, uint64_t size);
} parity_blob_sink;

/* The connection's limits an encoder honours (from the server's ServerInfo and the config). */
typedef struct parity_encode_limits {
  uint32_t size;
  uint64_t max_inline_tensor_bytes; /* larger: a blob */
  uint64_t max_tensor_bytes;        /* larger: statistics only */
  uint64_t reuse_min_bytes;         /* this large or more: add_reusable; 0: never */
  int32_t checksum;                 /* CRC-32C of every payload */
  const int32_t* accepted_dtypes;   /* the server's (parity.v1.DType); null: any */
  size_t accepted_dtype_count;
  /* (Present when `size` covers it.) A payload the encoder knows it passed to the sink's
   * add_reusable before as blob `blob_id`, from bytes that cannot have changed since (a snapshot
   * the torch half gives again): named again without its bytes being read. Returns `blob_id`
   * while the connection still keeps that blob with `size` bytes, else 0 (then add_reusable). */
  uint64_t (*add_known)(void* sink_ctx, uint64_t blob_id, uint64_t size);
} parity_encode_limits;

/* Bytes handed from one half to the other with their owner. */
typedef struct parity_bytes {
  const char* data;
  size_t size;
  void* owner;
  void (*release)(void* owner); /* frees data; may be null */
} parity_bytes;

/* A captured call's values, encoded later on the sender thread. */
typedef struct parity_values {
  uint32_t size; /* sizeof(parity_values) */
  void* ctx;
  uint64_t bytes;          /* tensor bytes captured (the queue's accounting) */
  double snapshot_seconds; /* the training thread's time in the copies */
  /* Writes the ApiCall's `inputs` (field 12) and `outputs` (field 13) as wire bytes into *out.
   * Returns 0, or a status code (3 INVALID_ARGUMENT, 12 UNIMPLEMENTED, 13 INTERNAL) with the
   * reason in `error`: the call then goes without values, its skip_reason saying why. */
  int (*encode)(void* ctx, const parity_encode_limits* limits, const parity_blob_sink* sink,
                parity_bytes* out, char* error, size_t error_size);
  /* Frees the snapshots; runs once, on any thread. */
  void (*release)(void* ctx);
} parity_values;

/* Hands the call to the queue (the policy decides: queued, dropped and counted). `values` null:
 * the call goes without values (PARITY_CALL_WITH_VALUES was not set). Takes `c`, and `values`
 * (released even when dropped). */
PARITY_TRANSPORT_API void parity_call_capture(parity_call* c, const parity_values* values);
/* A begun call that will not be captured (the copy failed, or was not admitted). */
PARITY_TRANSPORT_API void parity_call_discard(parity_call* c);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PARITY_TRANSPORT_H_ */
