// parity/transport.h over the agent's torch-free core: the session (agent/transport/session.h) and
// the sender under it. Nothing leaves these functions but their results: every exception is caught
// and logged here.
#include "parity/transport.h"

#include <google/protobuf/stubs/common.h>
#include <grpcpp/grpcpp.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/transport/session.h"
#include "agent/transport/transport_internal.h"
#include "common/base/log.h"
#include "common/config/config.h"
#include "common/wire/generator_device.h"
#include "nlohmann/json.hpp"
#include "parity/counter_fields.h"

#ifndef PARITY_VERSION
#define PARITY_VERSION "unknown"
#endif

struct parity_session {
  std::unique_ptr<parity::agent::Session> session;
};

// A parity_call is the call's CapturedCall itself (a record of the session's pool: no allocation
// of its own per call); the handle is only ever cast back.
namespace parity::agent {
namespace {

CapturedCall* Call(parity_call* c) { return reinterpret_cast<CapturedCall*>(c); }

void CopyError(const std::string& message, char* error, size_t size) {
  if (error == nullptr || size == 0) return;
  const std::size_t n = std::min(message.size(), size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

// Guards a C entry point: nothing escapes into the caller.
template <typename F, typename R>
R Guarded(const char* what, R fallback, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    common::LogError(absl::StrCat(what, ": ", e.what()));
  } catch (...) {
    common::LogError(absl::StrCat(what, ": unknown exception"));
  }
  return fallback;
}

void PrepareProcess() {
  static std::once_flag once;
  std::call_once(once, [] {
    // The agent's exit handler connects and sends over TLS (a server that comes up late, or
    // calls still queued). atexit handlers run last-registered first, and OpenSSL registers its
    // own cleanup when it is first initialised, which would be later (on the sender's first
    // connection): it then ran before the agent's and left TLS unusable ("ca.crt: not a PEM
    // certificate", "Could not create ssl context"). Initialised now without that cleanup, it
    // stays usable until the process ends.
    OPENSSL_init_ssl(
        OPENSSL_INIT_NO_ATEXIT | OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS,
        nullptr);
  });
}

}  // namespace

parity_session* WrapSession(std::unique_ptr<Session> session) {
  PrepareProcess();
  auto* s = new parity_session;
  s->session = std::move(session);
  return s;
}

}  // namespace parity::agent

using parity::agent::Call;
using parity::agent::Guarded;

extern "C" {

uint32_t parity_transport_abi(void) { return PARITY_TRANSPORT_ABI; }

const char* parity_transport_version(void) {
  static const std::string version =
      absl::StrCat(PARITY_VERSION, " (transport, gRPC ", grpc::Version(), ", protobuf ",
                   google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION), ")");
  return version.c_str();
}

void parity_log(int level, const char* message) {
  if (message == nullptr) return;
  const int l = std::clamp(level, 0, 3);
  parity::common::Log(static_cast<parity::common::LogLevel>(l), message);
}

const char* parity_config_keys_json(void) {
  static const std::string keys = [] {
    nlohmann::json j = nlohmann::json::array();
    for (const parity::common::KeyDescription& k : parity::common::AgentKeys()) {
      j.push_back(
          {{"path", k.path}, {"kind", k.kind}, {"doc", k.doc}, {"default", k.default_value}});
    }
    return j.dump();
  }();
  return keys.c_str();
}

int parity_config_check(const char* config_json, const char* source, char* error,
                        size_t error_size) {
  using namespace parity;  // NOLINT(build/namespaces)
  return Guarded("parity_config_check", 0, [&] {
    absl::StatusOr<common::Parsed<common::AgentConfig>> parsed = common::ParseAgentConfig(
        config_json != nullptr ? config_json : "", source != nullptr ? source : "config");
    absl::Status status = parsed.status();
    if (parsed.ok()) {
      for (const std::string& w : parsed->warnings) common::LogWarning(w);
      parity_host h{};
      h.size = sizeof(h);
      status = agent::Session::Create(std::move(parsed->config), h).status();
      if (!status.ok()) {  // as the parser's messages do, name the file
        status = absl::InvalidArgumentError(
            absl::StrCat(source != nullptr ? source : "config", ": ", status.message()));
      }
    }
    if (!status.ok()) agent::CopyError(std::string(status.message()), error, error_size);
    return status.ok() ? 1 : 0;
  });
}

parity_session* parity_session_create(const char* config_json, const char* config_path,
                                      const parity_host* host, char* error, size_t error_size) {
  using namespace parity;  // NOLINT(build/namespaces)
  return Guarded("parity_session_create", static_cast<parity_session*>(nullptr), [&] {
    common::SetLogPrefix("parity-agent");
    absl::StatusOr<common::Parsed<common::AgentConfig>> parsed =
        config_json != nullptr ? common::ParseAgentConfig(config_json, "config")
        : config_path != nullptr
            ? common::LoadAgentConfig(config_path)
            : absl::InvalidArgumentError("neither a configuration nor its path was given");
    if (!parsed.ok()) {
      agent::CopyError(std::string(parsed.status().message()), error, error_size);
      common::LogError(absl::StrCat("not started: ", parsed.status().message()));
      return static_cast<parity_session*>(nullptr);
    }
    for (const std::string& w : parsed->warnings) common::LogWarning(w);
    common::LogLevel level;
    if (common::ParseLogLevel(parsed->config.parity.log_level, &level)) common::SetLogLevel(level);
    parity_host h{};
    if (host != nullptr) std::memcpy(&h, host, std::min<std::size_t>(sizeof(h), host->size));
    h.size = sizeof(h);
    auto session = agent::Session::Create(std::move(parsed->config), h);
    if (!session.ok()) {
      agent::CopyError(std::string(session.status().message()), error, error_size);
      common::LogError(absl::StrCat("not started: ", session.status().message()));
      return static_cast<parity_session*>(nullptr);
    }
    return agent::WrapSession(*std::move(session));
  });
}

void parity_session_start(parity_session* s) {
  Guarded("parity_session_start", 0, [&] {
    s->session->Start();
    return 0;
  });
}

void parity_session_stop(parity_session* s) {
  Guarded("parity_session_stop", 0, [&] {
    s->session->Stop();
    return 0;
  });
}

int parity_session_step(parity_session* s, char* error, size_t error_size) {
  return Guarded("parity_session_step", 1, [&] {
    std::string text;
    if (s->session->Step(&text)) return 1;
    parity::agent::CopyError(text, error, error_size);
    return 0;
  });
}

void parity_session_set_step(parity_session* s, int64_t step) {
  Guarded("parity_session_set_step", 0, [&] {
    s->session->SetStep(step);
    return 0;
  });
}

void parity_session_end_forward(parity_session* s) {
  Guarded("parity_session_end_forward", 0, [&] {
    s->session->EndForward();
    return 0;
  });
}

void parity_session_use_explicit_steps(parity_session* s) {
  Guarded("parity_session_use_explicit_steps", 0, [&] {
    s->session->UseExplicitSteps();
    return 0;
  });
}

void parity_session_optimizer_step_done(parity_session* s) {
  Guarded("parity_session_optimizer_step_done", 0, [&] {
    s->session->OptimizerStepDone();
    return 0;
  });
}

void parity_session_compiled_region(parity_session* s, int32_t backward) {
  Guarded("parity_session_compiled_region", 0, [&] {
    s->session->CompiledRegion(backward != 0);
    return 0;
  });
}

void parity_session_custom_function(parity_session* s, const char* name, int64_t sequence_nr,
                                    const char* module) {
  Guarded("parity_session_custom_function", 0, [&] {
    s->session->CustomFunction(name != nullptr ? name : "", sequence_nr,
                               module != nullptr ? module : "");
    return 0;
  });
}

int parity_session_flush(parity_session* s, uint32_t timeout_ms) {
  return Guarded("parity_session_flush", 0, [&] { return s->session->Flush(timeout_ms) ? 1 : 0; });
}

void parity_session_close(parity_session* s) {
  Guarded("parity_session_close", 0, [&] {
    s->session->Close();
    return 0;
  });
}

void parity_session_destroy(parity_session* s) {
  if (s == nullptr) return;
  parity_session_close(s);
  Guarded("parity_session_destroy", 0, [&] {
    delete s;
    return 0;
  });
}

int parity_session_capturing(const parity_session* s) {
  return Guarded("parity_session_capturing", 0, [&] { return s->session->capturing() ? 1 : 0; });
}

int parity_session_ended(const parity_session* s) {
  return Guarded("parity_session_ended", 1, [&] { return s->session->ended() ? 1 : 0; });
}

int parity_session_wants_signatures(const parity_session* s) {
  return s->session->wants_signatures() ? 1 : 0;
}

void parity_session_counters(const parity_session* s, parity_counters* out) {
  Guarded("parity_session_counters", 0, [&] {
    const parity::agent::Counters c = s->session->GetCounters();
    parity_counters r{};
    r.size = sizeof(r);
#define PARITY_COPY(field) r.field = c.field;
    PARITY_AGENT_COUNTER_FIELDS(PARITY_COPY)
#undef PARITY_COPY
    auto dropped = [&c](const char* reason) {
      auto it = c.dropped.find(reason);
      return it == c.dropped.end() ? uint64_t{0} : it->second;
    };
#define PARITY_DROPPED(reason, enumerator, why) r.dropped_##reason = dropped(#reason);
    PARITY_DROP_REASONS(PARITY_DROPPED)
#undef PARITY_DROPPED
    r.connected = c.connected ? 1 : 0;
    // A caller compiled against an older, shorter struct gets its own fields only.
    const uint32_t n = std::min<uint32_t>(out->size, sizeof(r));
    std::memcpy(out, &r, n);
    out->size = n;
    return 0;
  });
}

int parity_session_report_replicas(parity_session* s, const parity_replica_report* report) {
  return Guarded("parity_session_report_replicas", 0, [&] {
    parity_replica_report r{};
    std::memcpy(&r, report, std::min<std::size_t>(sizeof(r), report->size));
    parity::v1::ReplicaReport w;
    for (std::size_t i = 0; i < r.group_size; ++i) w.add_group(r.group[i]);
    w.set_step(r.step);
    w.set_sequence(r.sequence);
    w.set_kind(r.kind != nullptr ? r.kind : "");
    w.set_op(r.op != nullptr ? r.op : "");
    w.set_algorithm(r.algorithm != nullptr ? r.algorithm : "");
    for (std::size_t i = 0; i < r.count; ++i) {
      parity::v1::ReplicaDigest* d = w.add_digests();
      d->set_name(r.names[i] != nullptr ? r.names[i] : "");
      d->set_digest(r.digests[i]);
      d->set_bytes(r.bytes != nullptr ? r.bytes[i] : 0);
    }
    return s->session->ReportReplicas(std::move(w)) ? 1 : 0;
  });
}

parity_call* parity_call_begin(parity_session* s, const parity_call_site* site, uint32_t* flags) {
  uint32_t ignored = 0;
  if (flags == nullptr) flags = &ignored;
  *flags = 0;
  return Guarded("parity_call_begin", static_cast<parity_call*>(nullptr), [&] {
    parity_call_site full{};
    std::memcpy(&full, site, std::min<std::size_t>(sizeof(full), site->size));
    std::unique_ptr<parity::agent::CapturedCall> call = s->session->Begin(full, flags);
    return reinterpret_cast<parity_call*>(call.release());
  });
}

int parity_session_admit(parity_session* s, uint64_t bytes) {
  return Guarded("parity_session_admit", 0, [&] { return s->session->Admit(bytes) ? 1 : 0; });
}

void parity_call_set_autocast_dtype(parity_call* c, int32_t dtype) {
  Call(c)->meta.autocast_dtype = static_cast<parity::wire::DType>(dtype);
}

void parity_call_set_generator(parity_call* c, const char* device_type, int32_t device_index,
                               const void* state, size_t state_size, const char* torch_version) {
  Guarded("parity_call_set_generator", 0, [&] {
    parity::agent::CapturedCall& call = *Call(c);
    if (call.watch_generator) {  // a call that drew without being listed as random
      call.meta.drew_random = true;
      call.session->NoteUndeclaredRandom(call.meta);
      if (state_size == 0) return 0;
    }
    parity::agent::CallRecord::Generator& g = call.meta.generator.emplace();
    g.device_type = device_type != nullptr ? device_type : "";
    g.device = static_cast<parity::wire::GeneratorDevice>(
        parity::common::GeneratorDeviceOf(g.device_type));
    g.device_index = device_index;
    g.state.assign(static_cast<const char*>(state), state_size);
    g.torch_version = torch_version != nullptr ? torch_version : "";
    return 0;
  });
}

void parity_call_capture(parity_call* c, const parity_values* values) {
  if (c == nullptr) {
    if (values != nullptr && values->release != nullptr) values->release(values->ctx);
    return;
  }
  std::unique_ptr<parity::agent::CapturedCall> owned(Call(c));
  Guarded("parity_call_capture", 0, [&] {
    if (values != nullptr) {
      parity_values v{};
      std::memcpy(&v, values, std::min<std::size_t>(sizeof(v), values->size));
      v.size = sizeof(v);
      owned->SetValues(v);
    }
    parity::agent::Session* session = owned->session;
    session->Capture(std::move(owned));
    return 0;
  });
}

void parity_call_discard(parity_call* c) {
  if (c == nullptr) return;
  std::unique_ptr<parity::agent::CapturedCall> owned(Call(c));
  owned->session->call_pool().Give(std::move(owned));
}

}  // extern "C"
