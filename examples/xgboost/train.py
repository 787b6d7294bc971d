#!/usr/bin/env python3
"""Distributed XGBoost training on OpenDLC's xgboost framework.

Every replica is one worker of XGBoost's collective (Rabit). OpenDLC gives each the
DMLC_* variables (frameworks/xgboost.go): the tracker's host and port, the number of
workers and the replica's rank. The rank-0 replica starts the tracker on that port
before it joins; every replica then joins the collective and trains on its own shard of
one synthetic data set (drawn from a fixed seed, so every run gives the same model).
XGBoost sums the shards' gradient histograms across the workers at every split, so all
of them grow the same trees.

Each replica prints what the collective computed, so that a run can be checked:

  xgboost-result {"rank": 0, "world_size": 3, "allreduce_sum": 6.0, ...}

with allreduce_sum the sum of rank+1 over the workers (6 for 3 workers), the model's
SHA-256 (identical on every worker) and the final training metrics. Rank 0 reports the
metrics of every boosting round with opendlc.report, which OpenDLC records as the job's
metrics.

Needs numpy and xgboost (Debian: python3-xgboost); the opendlc library (python/ in the
repository, on PYTHONPATH) is optional: without it the metric lines are printed by hand.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import struct
import sys
import time

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

try:
    from opendlc import report
except ImportError:  # run outside the repository: print the same metric line

    def report(step: int, /, **metrics: float) -> str:
        line = " ".join(["dlc:metric", f"step={step}"] + [f"{k}={v!r}" for k, v in metrics.items()])
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return line


# The DMLC_* variables OpenDLC sets (DMLC_ROLE=worker is one too): XGBoost's
# communicator takes them as its configuration.
RABIT_VARS = ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER")


def rabit_env() -> dict[str, str]:
    """The communicator's configuration: the DMLC_* variables, failing with their names
    when one is missing. A worker retries connecting to the tracker, waiting 2 s more
    after each try; Rabit gives up after 5 tries (30 s), which a rank 0 slow to start
    (a busy machine, a pod being scheduled) can exceed, so this asks for 10 (110 s)
    unless DMLC_WORKER_CONNECT_RETRY says otherwise."""
    missing = [v for v in RABIT_VARS if not os.environ.get(v)]
    if missing:
        sys.exit(f"train.py: {', '.join(missing)} not set: run it as an OpenDLC xgboost job")
    conf = {v: os.environ[v] for v in RABIT_VARS}
    conf["DMLC_WORKER_CONNECT_RETRY"] = os.environ.get("DMLC_WORKER_CONNECT_RETRY", "10")
    return conf


def start_tracker(port: int, n_workers: int) -> RabitTracker:
    """Starts the tracker on every interface, at the port OpenDLC gave the rendezvous.
    Ranks are assigned by DMLC_TASK_ID (sortby="task"), so a worker's collective rank is
    its OpenDLC rank."""
    tracker = RabitTracker(host_ip="0.0.0.0", n_workers=n_workers, port=port, sortby="task")
    tracker.start(n_workers)
    return tracker


def wait_for_tracker(host: str, port: int, rank: int, timeout: float = 110.0) -> None:
    """Waits until the tracker answers. Rabit (XGBoost 1.7) retries a connection the
    tracker refused on the same socket, and that retry can fail with "Broken pipe" once
    the tracker is up: seen on Kubernetes, where a worker's pod may start before the
    master's. So a worker first says hello with the tracker's own "print" command (the
    tracker prints the message and goes on; a bare connection that sent nothing would
    stall it), and starts the communicator only once that went through."""
    magic = 0xFF99  # the tracker's MAGIC_NUM

    def send_int(sock: socket.socket, value: int) -> None:
        sock.sendall(struct.pack("@i", value))

    def send_str(sock: socket.socket, value: str) -> None:
        send_int(sock, len(value))
        sock.sendall(value.encode())

    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=10) as sock:
                send_int(sock, magic)
                if struct.unpack("@i", sock.recv(4, socket.MSG_WAITALL))[0] != magic:
                    raise OSError("not an XGBoost tracker")
                send_int(sock, -1)  # rank: none yet
                send_int(sock, -1)  # world size: unknown
                send_str(sock, "NULL")  # task id
                send_str(sock, "print")
                send_str(sock, f"rank {rank} reached the tracker")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def synthetic_shard(rank: int, world: int, rows: int, features: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows of one seeded data set that belong to rank: every world-th row, from
    row rank. The labels follow a fixed linear rule with some noise."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, features))
    w = rng.normal(size=features)
    y = (x @ w + 0.5 * rng.normal(size=rows) > 0).astype(np.float64)
    return x[rank::world], y[rank::world]


class Report(xgb.callback.TrainingCallback):
    """Reports the (already cross-worker) training metrics of every round on rank 0."""

    def __init__(self, leader: bool) -> None:
        super().__init__()
        self.leader = leader

    def after_iteration(self, model: xgb.Booster, epoch: int, evals_log: dict) -> bool:
        if self.leader:
            train = evals_log["train"]
            report(epoch + 1, **{f"train_{name}": values[-1] for name, values in train.items()})
        return False  # never stop early


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=20, help="boosting rounds")
    p.add_argument("--rows", type=int, default=6000, help="rows of the whole data set")
    p.add_argument("--features", type=int, default=10)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()

    rabit = rabit_env()
    rank, world = int(rabit["DMLC_TASK_ID"]), int(rabit["DMLC_NUM_WORKER"])
    tracker = start_tracker(int(rabit["DMLC_TRACKER_PORT"]), world) if rank == 0 else None
    if tracker is None:
        wait_for_tracker(rabit["DMLC_TRACKER_URI"], int(rabit["DMLC_TRACKER_PORT"]), rank)

    x, y = synthetic_shard(rank, world, args.rows, args.features, args.seed)
    with collective.CommunicatorContext(**rabit):
        crank, cworld = collective.get_rank(), collective.get_world_size()
        if (crank, cworld) != (rank, world):
            sys.exit(f"train.py: the collective says rank {crank} of {cworld}, OpenDLC rank {rank} of {world}")
        total = collective.allreduce(np.array([rank + 1], dtype=np.float64), collective.Op.SUM)
        rows = collective.allreduce(np.array([len(y)], dtype=np.float64), collective.Op.SUM)

        params = {
            "objective": "binary:logistic",
            "eval_metric": ["logloss", "error"],
            "tree_method": "hist",
            "max_depth": 4,
            "eta": 0.3,
            "nthread": 1,
            "seed": args.seed,
        }
        evals_log: dict = {}
        booster = xgb.train(
            params,
            xgb.DMatrix(x, label=y),
            num_boost_round=args.rounds,
            evals=[(xgb.DMatrix(x, label=y), "train")],
            evals_result=evals_log,
            verbose_eval=False,
            callbacks=[Report(rank == 0)],
        )
        model = bytes(booster.save_raw("json"))
        result = {
            "rank": rank,
            "world_size": cworld,
            "allreduce_sum": float(total[0]),
            "shard_rows": len(y),
            "total_rows": int(rows[0]),
            "rounds": booster.num_boosted_rounds(),
            "model_sha256": hashlib.sha256(model).hexdigest(),
            "train_logloss": evals_log["train"]["logloss"][-1],
            "train_error": evals_log["train"]["error"][-1],
        }
        # One write: on rank 0 the tracker's thread prints too.
        sys.stdout.write("xgboost-result " + json.dumps(result, sort_keys=True) + "\n")
        sys.stdout.flush()
    if tracker is not None:
        tracker.join()  # returns once every worker has shut its connection down


if __name__ == "__main__":
    main()
