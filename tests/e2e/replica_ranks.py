"""A data-parallel Llama training on N gloo ranks (torch.multiprocessing.spawn), checked with
parity.replicas (docs/replicas.md): DDP, AdamW, optionally bf16 autocast, an all_gather of the
loss every step, msprobe's start()/stop()/step() loop. A fault can be planted on one rank at one
step, each inside the operation whose outputs every rank must hold alike:

  grad:RANK:STEP    DDP's gradient all-reduce (a communication hook) leaves one element with its
                    lowest bit flipped on that rank
  update:RANK:STEP  the optimizer's step (an AdamW whose step() flips a bit of the first
                    parameter after updating it) on that rank
  gather:RANK:STEP  torch.distributed.all_gather returns one element of output[1] flipped
  die:RANK:STEP     the rank exits mid-step, after its backward, before its optimizer step (the
                    others wait for their reports' verdicts before the collective that fails)
  pause:RANK:STEP   at the start of that step the rank delivers what it reported, then waits
                    for the file RENDEZVOUS.resume (the others wait in their collectives): a test
                    does something to the servers meanwhile

    python3 replica_ranks.py CONFIG.json WORLD RENDEZVOUS STEPS [FAULT] [--bf16] [--no-parity]
                             [--processes]
Prints "rank R done" per rank that finished, and "rank R step_ms X" (the median step time
after the first step: tests/bench/replica_overhead.py). --no-parity: the same training without
Parity (CONFIG is not read). RENDEZVOUS: a file that does not exist yet, where the ranks meet
(a file store: no TCP port that another program could take between its choice and its use);
a collective that waits past 120 s fails instead of hanging, a rank still running after
PARITY_TEST_RANK_DEADLINE_S (200 s) prints its threads' stacks and exits, and a rank that is
done exits at once (torch 1.13's gloo teardown hangs now and then)."""
import datetime
import faulthandler
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "docs", "examples"))


def flip(t):
    """The lowest bit of the first element's first 32-bit word, in place."""
    words = t.detach().view(-1).view(torch.int32)
    words[0] ^= 1


def rank_main(rank, world, rendezvous, config, steps, fault, bf16, parity=True):
    # A rank stuck anywhere prints every thread's stack and exits, rather than hang its caller.
    faulthandler.dump_traceback_later(int(os.environ.get("PARITY_TEST_RANK_DEADLINE_S", "200")),
                                      exit=True)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    from train_llama import Llama  # pylint: disable=import-outside-toplevel
    from parity import PrecisionDebugger  # pylint: disable=import-outside-toplevel
    kind, fault_rank, fault_step = (fault.split(":")[0], int(fault.split(":")[1]),
                                    int(fault.split(":")[2])) if fault else (None, -1, -1)
    here = rank == fault_rank
    step_now = [0]

    # The gather fault: the collective itself returns a wrong element on one rank (planted before
    # Parity wraps torch.distributed, so Parity sees what the training sees).
    if kind == "gather" and here:
        original = dist.all_gather

        def faulty_all_gather(tensor_list, tensor, group=None, async_op=False):
            work = original(tensor_list, tensor, group=group, async_op=async_op)
            if step_now[0] == fault_step:
                flip(tensor_list[1])
            return work

        dist.all_gather = faulty_all_gather

    class AdamW(torch.optim.AdamW):
        def step(self, closure=None):  # pylint: disable=arguments-differ
            loss = super().step(closure)
            if kind == "update" and here and step_now[0] == fault_step:
                flip(self.param_groups[0]["params"][0])
            return loss

    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(Llama(dim=64, layers=2, seq=16))

    def allreduce_hook(state, bucket):
        fut = dist.all_reduce(bucket.buffer().div_(world), async_op=True).get_future()

        def then(f):
            out = f.value()[0]
            if kind == "grad" and here and step_now[0] == fault_step:
                flip(out)
            return out

        return fut.then(then)

    model.register_comm_hook(None, allreduce_hook)
    opt = AdamW(model.parameters(), lr=1e-3)
    debugger = PrecisionDebugger(config_path=config) if parity else None
    generator = torch.Generator().manual_seed(100 + rank)  # each replica its own data
    times = []
    for step in range(steps):
        start = time.perf_counter()
        step_now[0] = step
        if kind == "pause" and here and step == fault_step:
            if debugger:
                debugger.flush(60)
            resume = rendezvous + ".resume"
            deadline = time.monotonic() + 100
            while not os.path.exists(resume) and time.monotonic() < deadline:
                time.sleep(0.05)
        if debugger:
            debugger.start(model)
        tokens = torch.randint(0, 128, (2, 16), generator=generator)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, 128), tokens.view(-1))
        loss.backward()
        if kind == "die" and here and step == fault_step:
            os._exit(3)  # pylint: disable=protected-access
        opt.step()
        if kind == "die" and step == fault_step and debugger:
            # The others' reports of this step reach the server before the next collective finds
            # the dead rank and ends them (mp.spawn then stops every rank): the server concludes
            # the step without it once parity.replica_wait_ms runs out, and answers.
            debugger.flush(60)
        opt.zero_grad()
        losses = [torch.zeros(1) for _ in range(world)]
        dist.all_gather(losses, loss.detach().reshape(1))
        if debugger:
            debugger.stop()
            debugger.step()
        times.append(time.perf_counter() - start)
    if debugger:
        debugger.close()
    print(f"rank {rank} step_ms {statistics.median(times[1:] or times) * 1e3:.2f}", flush=True)
    print(f"rank {rank} done", flush=True)
    dist.destroy_process_group()
    # Gone without tearing down the DDP model and its process group: torch 1.13's gloo group,
    # destroyed with the model at this function's return, waits forever now and then (1 run in
    # 4 to 10 here, without Parity too: faulthandler's dump showed the rank after "done", inside
    # that teardown). What the run had to say is said.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # pylint: disable=protected-access


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    config_path, world, rendezvous, steps = args[0], int(args[1]), args[2], int(args[3])
    fault = args[4] if len(args) > 4 else ""
    options = ("--bf16" in sys.argv, "--no-parity" not in sys.argv)
    rank_flag = [a for a in sys.argv if a.startswith("--rank=")]
    if rank_flag:  # one rank of --processes
        rank_main(int(rank_flag[0].split("=")[1]), world, rendezvous, config_path, steps, fault,
                  *options)
    elif "--processes" in sys.argv:
        # Each rank its own process, as torchrun starts them: a rank that dies does not take the
        # others down with it (mp.spawn terminates them at once); they fail at their next
        # collective instead. Exit status: the highest of the ranks'.
        import subprocess  # pylint: disable=import-outside-toplevel
        ranks = [subprocess.Popen([sys.executable, *sys.argv, f"--rank={r}"])
                 for r in range(world)]
        sys.exit(max(p.wait() for p in ranks))
    else:
        mp.spawn(rank_main, args=(world, rendezvous, config_path, steps, fault, *options),
                 nprocs=world)
