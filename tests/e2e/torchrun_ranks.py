"""A two-rank training as torchrun runs it: each rank gets RANK, WORLD_SIZE, LOCAL_RANK and
MASTER_ADDR/MASTER_PORT from the launcher, which itself runs no operator. Run with LD_PRELOAD and
PARITY_CONFIG, each rank checks its own calls, and torchrun is no session of its own
(test_agent_e2e.py)."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    loss = torch.nn.functional.gelu(model(torch.full((2, 8), float(step)))).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
