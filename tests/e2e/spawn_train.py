"""A training that spawns processes (multiprocessing's spawn context, a DataLoader with spawned
workers, and so multiprocessing's resource tracker): run with LD_PRELOAD and PARITY_CONFIG, only
this process may start an agent (test_agent_e2e.py)."""
import multiprocessing as mp
import os, sys
import torch

def child(q):
    x = torch.randn(64, 64)
    q.put(float((x @ x).sum()))

class DS(torch.utils.data.Dataset):
    def __len__(self): return 8
    def __getitem__(self, i): return torch.randn(4) * i

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start(); q.get(); p.join()
    dl = torch.utils.data.DataLoader(DS(), batch_size=2, num_workers=2, multiprocessing_context="spawn")
    w = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(w.parameters(), lr=0.1)
    for b in dl:
        loss = w(b).sum(); loss.backward(); opt.step(); opt.zero_grad()
    print("done")
