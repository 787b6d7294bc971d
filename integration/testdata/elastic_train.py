"""An elastic training loop for torchrun (c10d rendezvous, gloo, CPU).

Each (re)start of the workers prints the world it joined, then runs --steps
all-reduce steps; a restart of the workers (a member lost or joining) starts the
loop again in the new world. TORCHELASTIC_RESTART_COUNT is torchrun's count of
worker restarts on this node.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--step-sleep", type=float, default=0.25)
a = p.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
print(f"elastic joined: rank={rank} world={world} restart={restart} agent={os.getppid()}", flush=True)
for step in range(a.steps):
    t = torch.ones(1)
    dist.all_reduce(t)
    print(f"elastic step={step} rank={rank} world={world} sum={int(t.item())} restart={restart}", flush=True)
    time.sleep(a.step_sleep)
dist.barrier()
print(f"elastic done: rank={rank} world={world} restart={restart}", flush=True)
dist.destroy_process_group()
