"""A two-rank training launched with torch.multiprocessing.spawn, as its tutorials write it: the
launcher sets MASTER_ADDR/MASTER_PORT and no RANK, each rank learns its rank only from
init_process_group(rank=...). Run with LD_PRELOAD and PARITY_CONFIG, each rank must check its
own calls as its own rank (test_agent_e2e.py); a DataLoader worker a rank spawns checks
nothing."""
import os, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class DS(torch.utils.data.Dataset):
    def __len__(self): return 4
    def __getitem__(self, i): return torch.full((8,), float(i))


def rank_main(rank, world, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(DS(), batch_size=2, num_workers=1,
                                         multiprocessing_context="spawn")
    for batch in loader:
        loss = torch.nn.functional.gelu(model(batch)).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(rank_main, args=(2, int(sys.argv[1])), nprocs=2)
    print("done")
