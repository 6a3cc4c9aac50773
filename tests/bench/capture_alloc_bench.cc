// What the training thread allocates and spends per captured call in the transport half:
// parity_call_begin (naming, filters, the call's record), then parity_call_capture (the hand-off),
// through the C API the torch half calls, with realistic names (an LLM layer's forward and
// backward operators under module paths of 40-60 characters). Every allocation on the calling
// thread is counted (this program replaces operator new). The session is not started, so the
// hand-off gives the record straight back, as the sender does once a call is written: the
// sender's own work is not in these figures.
//
// Each build is measured in a process of its own, rows side by side:
//   capture_alloc_bench [--quick] [--calls N] [--baseline-lib PATH/libparity_transport.so]
// (--baseline-lib: another build's transport library, e.g. the commit before the pooled record.)
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "parity/transport.h"
#include "tests/bench/counting_new.h"

namespace {

struct Api {
  parity_session* (*create)(const char*, const char*, const parity_host*, char*, size_t);
  parity_call* (*begin)(parity_session*, const parity_call_site*, uint32_t*);
  int (*step)(parity_session*, char*, size_t);
  void (*capture)(parity_call*, const parity_values*);
  void (*destroy)(parity_session*);
};

template <typename F>
F Symbol(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (f == nullptr) {
    std::fprintf(stderr, "%s: %s\n", name, dlerror());
    std::exit(2);
  }
  return reinterpret_cast<F>(f);
}

// One build: allocations and ns per call, on this thread.
int Measure(const char* lib_path, long calls) {
  void* lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  Api api{Symbol<decltype(Api::create)>(lib, "parity_session_create"),
          Symbol<decltype(Api::begin)>(lib, "parity_call_begin"),
          Symbol<decltype(Api::step)>(lib, "parity_session_step"),
          Symbol<decltype(Api::capture)>(lib, "parity_call_capture"),
          Symbol<decltype(Api::destroy)>(lib, "parity_session_destroy")};
  const char* config = R"({"task": "tensor", "tensor": {"online_run_ut": true,
      "host": "127.0.0.1", "port": 9}, "parity": {"plaintext": true, "log_level": "error"}})";
  parity_host host{};
  host.size = sizeof(host);
  host.framework_version = "torch bench";
  host.device_type = "cpu";
  char error[512] = {0};
  parity_session* s = api.create(config, nullptr, &host, error, sizeof(error));
  if (s == nullptr) {
    std::fprintf(stderr, "session: %s\n", error);
    return 2;
  }
  // Steps of 512 calls: a decoder layer's 256 forward calls, then their 256 backward calls
  // linked by autograd sequence number (numbers that go on growing, as autograd's do).
  const char* ops[] = {"aten::linear", "aten::mul",     "aten::add",   "aten::silu",
                       "aten::matmul", "aten::softmax", "aten::rsqrt", "aten::mean"};
  const char* modules[] = {"model.layers.11.self_attn.q_proj",
                           "model.layers.11.self_attn.rotary_emb",
                           "model.layers.11.post_attention_layernorm",
                           "model.layers.11.mlp.gate_proj", "model.layers.11.mlp.down_proj"};
  const char* nodes[] = {"AddmmBackward0", "MulBackward0",     "AddBackward0",   "SiluBackward0",
                         "MmBackward0",    "SoftmaxBackward0", "RsqrtBackward0", "MeanBackward1"};
  auto one = [&](long i) {
    parity_call_site site{};
    site.size = sizeof(site);
    const bool backward = i % 512 >= 256;
    const int64_t sequence_nr = (i / 512) * 256 + i % 256;
    if (i % 512 == 0) api.step(s, nullptr, 0);
    site.op = ops[i % 8];
    site.overload = "";
    site.backward = backward ? 1 : 0;
    site.node = backward ? nodes[i % 8] : "";
    site.node_sequence_nr = backward ? sequence_nr : 0;
    site.forward_sequence_nr = sequence_nr;
    site.module = modules[i % 5];
    site.api = backward ? nullptr : "Functional.linear";
    uint32_t flags = 0;
    parity_call* c = api.begin(s, &site, &flags);
    if (c != nullptr) api.capture(c, nullptr);
  };
  for (long i = 0; i < 4096; ++i) one(i);  // warm: the maps' nodes, the pool's records
  parity::bench::t_allocations = 0;
  parity::bench::t_counting = true;
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < calls; ++i) one(i);
  const auto end = std::chrono::steady_clock::now();
  parity::bench::t_counting = false;
  const double ns = std::chrono::duration<double, std::nano>(end - start).count() / calls;
  std::printf("%.3f %.1f\n", static_cast<double>(parity::bench::t_allocations) / calls, ns);
  api.destroy(s);
  return 0;
}

// Runs `self --lib lib` and reads its line.
bool Child(const std::string& self, const std::string& lib, long calls, double* allocs,
           double* ns) {
  const std::string cmd = self + " --lib '" + lib + "' --calls " + std::to_string(calls);
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return false;
  const int got = std::fscanf(p, "%lf %lf", allocs, ns);
  return pclose(p) == 0 && got == 2;
}

std::string OwnLib(const char* argv0) {
  const char* dir = std::getenv("PARITY_BUILD_DIR");
  if (dir != nullptr) return std::string(dir) + "/agent/libparity_transport.so";
  std::string self(argv0);
  return self.substr(0, self.rfind("/tests/bench/")) + "/agent/libparity_transport.so";
}

}  // namespace

int main(int argc, char** argv) {
  long calls = 200000;
  std::string lib, baseline;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") calls = 5000;
    if (a == "--calls" && i + 1 < argc) calls = std::atol(argv[++i]);
    if (a == "--lib" && i + 1 < argc) lib = argv[++i];
    if (a == "--baseline-lib" && i + 1 < argc) baseline = argv[++i];
  }
  if (!lib.empty()) return Measure(lib.c_str(), calls);
  char self[4096] = {0};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) return 2;
  const std::string own = OwnLib(self);
  std::printf(
      "the training thread's transport half per captured call (parity_call_begin + "
      "parity_call_capture, names of an LLM layer; steps of 256 forward calls and their "
      "256 backward calls), %ld "
      "calls after 4,096 to warm up\n",
      calls);
  std::printf("%-12s %12s %10s  %s\n", "build", "allocs/call", "ns/call", "library");
  std::vector<std::pair<std::string, std::string>> rows = {{"this", own}};
  if (!baseline.empty()) rows.push_back({"baseline", baseline});
  for (int round = 0; round < 2; ++round) {  // interleaved: this, baseline, this, baseline
    for (const auto& [name, path] : rows) {
      double allocs = 0, ns = 0;
      if (!Child(self, path, calls, &allocs, &ns)) {
        std::fprintf(stderr, "%s: the measurement failed\n", path.c_str());
        return 1;
      }
      std::printf("%-12s %12.3f %10.1f  %s\n", name.c_str(), allocs, ns, path.c_str());
    }
  }
  return 0;
}
