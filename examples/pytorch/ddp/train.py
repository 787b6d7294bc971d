"""A tiny, deterministic PyTorch DistributedDataParallel program for OpenDLC.

Every replica is one process; torch.distributed's env:// rendezvous reads MASTER_ADDR,
MASTER_PORT, WORLD_SIZE and RANK, which OpenDLC's pytorch framework sets. The backend is
NCCL when CUDA is present, gloo otherwise.

What it prints, so that a test (or a person) can check the framework's own result:

- after its first collective, each rank all-reduces rank+1 and prints
  ``first all_reduce: rank=R world=W sum=S expected=E unix_ns=T`` (the sum must be
  W(W+1)/2 on every rank; T is the wall clock when it completed);
- rank 0 reports ``dlc:metric step=N loss=L batch_loss=B`` every step through
  opendlc.report: L is the loss on a fixed set of 1024 examples after the step, B the
  step's batch loss averaged over the ranks (an all-reduce);
- at the end every rank prints ``params rank=R sha256=H`` over its parameters (DDP keeps
  them identical) and rank 0 prints ``final step=N loss=L``.

Checkpoints: rank 0 saves the model, the optimizer and the RNG state with
opendlc.torch.save_state every --checkpoint-every steps to DLC_CHECKPOINT_URI; on start
every rank loads DLC_RESUME_FROM when the control plane set it and continues from the step
after it, with the learning rate and momentum of its own arguments. The data of a step
depends only on the seed and the step, so a resumed run trains on exactly the batches an
uninterrupted one would have. When DLC_STOP_AT_STEP is set (a trial of an experiment
with algorithm pbt) it stops after that step, with a checkpoint there.

Run it from the repository root with PYTHONPATH=python (see job.yaml).
"""

import argparse
import hashlib
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import opendlc
from opendlc import torch as dlc_torch


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40, help="optimizer steps in all")
    p.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    p.add_argument("--hidden", type=int, default=16, help="width of the hidden layer")
    p.add_argument("--batch", type=int, default=32, help="examples per rank per step")
    p.add_argument("--seed", type=int, default=1, help="seed of the data and the initial weights")
    p.add_argument("--checkpoint-every", type=int, default=5, help="steps between checkpoints (0: none)")
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds to sleep after each step")
    return p.parse_args()


FEATURES = 8
EVAL = 1024  # the examples the reported loss is measured on, after each step


def dataset(seed: int, n: int = 4096) -> "tuple[torch.Tensor, torch.Tensor]":
    """A fixed regression problem: y = sin(x·w) + x·v + noise, the same for every rank."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    w, v = torch.randn(FEATURES, generator=g), torch.randn(FEATURES, generator=g)
    y = torch.sin(x @ w) + 0.5 * (x @ v) + 0.05 * torch.randn(n, generator=g)
    return x, y.unsqueeze(1)


def batch(x: torch.Tensor, y: torch.Tensor, step: int, rank: int, world: int, size: int):
    """The batch of a rank at a step: a function of (step, rank) only, so that resuming at
    a step reads what an uninterrupted run reads there."""
    n = x.shape[0]
    start = ((step - 1) * world + rank) * size % n
    idx = torch.arange(start, start + size) % n
    return x[idx], y[idx]


def params_digest(model: nn.Module) -> str:
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main() -> None:
    args = parse_args()
    e = opendlc.env()
    cuda = torch.cuda.is_available()
    backend = "nccl" if cuda else "gloo"
    device = torch.device(f"cuda:{e.rendezvous.local_rank or 0}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(backend=backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()

    # The framework's own collective: every rank contributes rank+1.
    t = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    opendlc.print_line(f"first all_reduce: rank={rank} world={world} sum={t.item():g} "
                       f"expected={world * (world + 1) // 2} backend={backend} unix_ns={time.time_ns()}")

    torch.manual_seed(args.seed)
    x, y = dataset(args.seed)
    eval_x, eval_y = x[:EVAL].to(device), y[:EVAL].to(device)
    model = nn.Sequential(nn.Linear(FEATURES, args.hidden), nn.Tanh(), nn.Linear(args.hidden, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    start = 0
    resumed = dlc_torch.load_state()
    if resumed is not None:
        manifest, state = resumed
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        start = state["step"]
        # The optimizer's settings are this run's, not the checkpoint's: a trial of
        # population-based training resumes another trial's state with new ones.
        for group in opt.param_groups:
            group["lr"], group["momentum"] = args.lr, args.momentum
        print(f"resumed from {manifest.ref} at step {start}", flush=True)
    ddp = DDP(model, device_ids=[device.index] if cuda else None)

    loss_fn = nn.MSELoss()
    loss_val = float("nan")
    # With an experiment's algorithm pbt, the trial's generation ends at DLC_STOP_AT_STEP.
    last = args.steps if e.stop_at_step is None else min(args.steps, e.stop_at_step)
    for step in range(start + 1, last + 1):
        xb, yb = batch(x, y, step, rank, world, args.batch)
        opt.zero_grad()
        loss = loss_fn(ddp(xb.to(device)), yb.to(device))
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.SUM)
        if rank == 0:
            with torch.no_grad():
                loss_val = loss_fn(model(eval_x), eval_y).item()
            opendlc.report(step, loss=loss_val, batch_loss=mean.item() / world)
            every = args.checkpoint_every > 0 and step % args.checkpoint_every == 0
            if e.checkpoint_uri and (every or (step == last and e.stop_at_step is not None)):
                dlc_torch.save_state(step, {
                    "step": step, "model": model.state_dict(), "optimizer": opt.state_dict(),
                    "rng": torch.get_rng_state(),
                }, {"loss": loss_val})
        if args.step_sleep > 0:
            time.sleep(args.step_sleep)

    if rank == 0 and e.checkpoint_uri:
        opendlc.wait()  # every checkpoint is complete before the job may succeed
    dist.barrier()
    opendlc.print_line(f"params rank={rank} sha256={params_digest(model)}")
    if rank == 0:
        print(f"final step={last} loss={loss_val!r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
