// What the agent allocates and spends on the training thread per captured call, the torch half
// included: an LLM block's operators (linear, SiLU, mul, add, softmax, matmul, RMSNorm's pieces)
// run in a loop through libparity_agent.so's C++ API, every call captured (policy block) and sent
// to a parity-server this program starts (--replay=false), against the same loop with capture
// paused (Stop()), rows interleaved. Every allocation on the training thread is counted (this
// program replaces operator new). The difference per captured call is the agent's: its records,
// snapshots, and libtorch's own for the hook (the ObserverContext its RecordFunction API takes).
//   agent_alloc_bench [--quick] [--steps N]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>

#include "parity/agent.h"
#include "tests/bench/counting_new.h"

namespace {

// The port parity-server wrote to `path` once listening (--port=0 --port_file), or 0.
int PortFrom(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return 0;
  int port = 0, metrics = 0;
  if (std::fscanf(f, "%d %d", &port, &metrics) != 2) port = 0;
  std::fclose(f);
  return port;
}

bool Accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

// One step of an LLM block's forward operators (no autograd: the calls the hook sees are these).
void Block(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w2,
           const torch::Tensor& g) {
  torch::NoGradGuard no_grad;
  const torch::Tensor norm = x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * g;
  const torch::Tensor h = torch::nn::functional::linear(norm, w1);
  const torch::Tensor a = torch::silu(h) * h;
  const torch::Tensor s = torch::softmax(torch::matmul(a, a.transpose(0, 1)), -1);
  const torch::Tensor out = torch::nn::functional::linear(torch::matmul(s, a), w2) + x;
  (void)out;
}

struct Row {
  double allocs_per_step = 0, ns_per_step = 0;
};

Row Measure(int steps, const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w2,
            const torch::Tensor& g) {
  parity::bench::t_allocations = 0;
  parity::bench::t_counting = true;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) Block(x, w1, w2, g);
  const auto end = std::chrono::steady_clock::now();
  parity::bench::t_counting = false;
  return {static_cast<double>(parity::bench::t_allocations) / steps,
          std::chrono::duration<double, std::nano>(end - start).count() / steps};
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 400;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") steps = 20;
    if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
  }
  char self[4096] = {0};
  if (readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) return 2;
  const std::string exe(self);
  const std::string server = exe.substr(0, exe.rfind("/tests/bench/")) + "/server/parity-server";
  char out_dir[] = "/tmp/parity_alloc_bench_XXXXXX";
  if (mkdtemp(out_dir) == nullptr) return 2;
  const std::string port_file = std::string(out_dir) + "/ports.txt";
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string f = "--port_file=" + port_file, o = std::string("--output_dir=") + out_dir;
    execl(server.c_str(), server.c_str(), "--port=0", "--metrics_port=0", f.c_str(), o.c_str(),
          "--replay=false", "--plaintext", static_cast<char*>(nullptr));
    _exit(127);
  }
  int port = 0;
  for (int i = 0; i < 600 && (port = PortFrom(port_file)) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (port == 0 || !Accepts(port)) {
    std::fprintf(stderr, "%s did not start\n", server.c_str());
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    return 2;
  }
  torch::set_num_threads(1);
  torch::manual_seed(0);
  const torch::Tensor x = torch::randn({64, 256}), w1 = torch::randn({512, 256}),
                      w2 = torch::randn({256, 512}), g = torch::randn({256});
  Measure(5, x, w1, w2, g);  // warm
  const std::string config =
      R"({"task": "tensor", "tensor": {"online_run_ut": true, "host": "127.0.0.1", "port": )" +
      std::to_string(port) +
      R"(}, "parity": {"plaintext": true, "policy": "block", "block_timeout_ms": 60000,
          "log_level": "error"}})";
  std::string error;
  int rc = 0;
  if (!parity::agent::Start(config, &error)) {
    std::fprintf(stderr, "agent: %s\n", error.c_str());
    rc = 1;
  } else {
    parity::agent::Flush(30000);
    Measure(5, x, w1, w2, g);  // the pools and caches warm
    parity::agent::Flush(30000);
    Row off[2], on[2];
    uint64_t captured = 0;
    for (int round = 0; round < 2; ++round) {
      parity::agent::Stop();
      off[round] = Measure(steps, x, w1, w2, g);
      parity::agent::Start(config, &error);
      const uint64_t before = parity::agent::GetCounters().captured;
      on[round] = Measure(steps, x, w1, w2, g);
      captured = parity::agent::GetCounters().captured - before;
      parity::agent::Flush(60000);
    }
    const double calls = static_cast<double>(captured) / steps;
    std::printf(
        "the training thread per step of an LLM block's %.0f forward operators, %d steps, "
        "every call captured and sent (policy block, server not replaying), rows "
        "interleaved\n",
        calls, steps);
    std::printf("%-22s %14s %12s\n", "row", "allocs/step", "us/step");
    for (int round = 0; round < 2; ++round) {
      std::printf("%-22s %14.1f %12.1f\n", "capture paused", off[round].allocs_per_step,
                  off[round].ns_per_step / 1e3);
      std::printf("%-22s %14.1f %12.1f\n", "every call captured", on[round].allocs_per_step,
                  on[round].ns_per_step / 1e3);
    }
    const double added = ((on[0].allocs_per_step - off[0].allocs_per_step) +
                          (on[1].allocs_per_step - off[1].allocs_per_step)) /
                         2;
    std::printf("allocations the agent adds a captured call on the training thread: %.1f\n",
                calls > 0 ? added / calls : 0.0);
    parity::agent::Close();
  }
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  return rc;
}
