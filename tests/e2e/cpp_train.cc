// A libtorch program checked through the agent's C++ API: a two-layer MLP, forward and backward,
// SGD, five steps.   cpp_train config.json
#include <torch/torch.h>

#include <cstdio>

#include "parity/agent.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cpp_train config.json\n");
    return 2;
  }
  std::string error;
  if (!parity::agent::StartFromFile(argv[1], &error)) {
    std::fprintf(stderr, "parity: %s\n", error.c_str());
    return 1;
  }
  parity::agent::UseExplicitSteps();
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(16, 32), torch::nn::Tanh(),
                              torch::nn::Linear(32, 1));
  torch::optim::SGD opt(model->parameters(), 0.05);
  const torch::Tensor x = torch::randn({32, 16}), y = torch::randn({32, 1});
  for (int step = 0; step < 5; ++step) {
    opt.zero_grad();
    torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    opt.step();
    if (!parity::agent::Step(&error)) std::fprintf(stderr, "parity: %s\n", error.c_str());
  }
  parity::agent::Flush(30000);
  parity::agent::Close();  // delivers, logs the counters (it would also run at exit)
  const parity::agent::Counters c = parity::agent::GetCounters();
  std::printf("captured %llu, sent %llu, verdicts %llu (pass %llu, error %llu)\n",
              static_cast<unsigned long long>(c.captured), static_cast<unsigned long long>(c.sent),
              static_cast<unsigned long long>(c.verdicts), static_cast<unsigned long long>(c.pass),
              static_cast<unsigned long long>(c.error));
  return c.verdicts > 0 && c.error == 0 ? 0 : 3;
}
