"""Four ranks (gloo, torch.multiprocessing.spawn, the Python agent as msprobe's users start it)
stream to one server that the test freezes (SIGSTOP) once they are connected. Rank 0 alone then
makes calls until its wait for room runs out (parity.block_timeout_ms) and its breaker trips; the
others wait for it in a barrier, as ranks wait in their collectives. Then ranks 1-3 make calls
until they drop some. Each rank writes its counters; the test reads who waited
(test_rank_breaker.py).

    frozen_server_ranks.py CONFIG WORKDIR MASTER_PORT
"""
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 4


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.02)  # the test writes it


def until_shedding(parity, x):
    # Fresh 1 MiB outputs fill the frozen server's socket, the agent's queue, then the wait.
    for i in range(100000):
        x.add(float(i))
        if parity.counters()["dropped"]["queue_full"] > 0:
            return
    raise SystemExit("the agent never dropped a call against the frozen server")


def rank_main(rank, config, work, port):
    import parity
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    debugger = parity.PrecisionDebugger(config_path=config)
    debugger.start()
    x = torch.randn(256, 1024)
    x.add(1.0)
    debugger.flush(timeout_s=120)  # connected, and the call checked
    dist.barrier()
    if rank == 0:
        open(os.path.join(work, "ready"), "w").close()
        wait_for(os.path.join(work, "frozen"))
    dist.barrier()
    if rank == 0:
        until_shedding(parity, x)
    dist.barrier()
    if rank != 0:
        until_shedding(parity, x)
    with open(os.path.join(work, f"rank{rank}.json"), "w") as f:
        json.dump(parity.counters(), f)
    dist.barrier()
    if rank == 0:
        open(os.path.join(work, "shed"), "w").close()
        wait_for(os.path.join(work, "thawed"))
    dist.barrier()
    debugger.stop()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(rank_main, args=(sys.argv[1], sys.argv[2], int(sys.argv[3])), nprocs=WORLD)
    print("done")
