#!/usr/bin/env python3
"""Submit a training job, follow its logs to the end, then tune its learning rate with an
experiment and print the trials as a table: what `dlc job submit`, `dlc job logs -f`
and `dlc experiment create --wait` do, from Python (opendlc.client, docs/python.md).

With `dlc up` running (the client finds the server and token as dlc does: $DLC_SERVER
and $DLC_TOKEN, else dlc up's defaults), from the repository root:

    PYTHONPATH=python python3 examples/python/submit_follow_tune.py

The "training program" is a few lines of Python run by the local backend: gradient
descent on (w - 3)^2 at a learning rate it is given, reporting its loss each step as
`dlc:metric step=N loss=L` (what opendlc.report prints), so it needs no framework.
"""

from __future__ import annotations

import argparse
import sys

from opendlc.client import Client, NotFoundError

TRAIN = """
import sys, time
lr, w = float(sys.argv[1]), 0.0
for step in range(1, 6):
    w -= lr * 2 * (w - 3)
    print(f"dlc:metric step={step} loss={(w - 3) ** 2:.6f}", flush=True)
    time.sleep(0.1)
print(f"done: w={w:.4f}")
"""


def job_doc(name: str, workspace: str, lr: str) -> dict:
    return {
        "apiVersion": "opendlc.io/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": name, "workspace": workspace, "labels": {"example": "python"}},
        "spec": {"framework": "custom", "command": ["python3", "-c", TRAIN, lr],
                 "roles": {"worker": {"replicas": 1, "resources": {"cpu": "1", "memory": "128Mi"}}},
                 "timeout": "5m"},
    }


def experiment_doc(name: str, workspace: str, trials: int) -> dict:
    template = job_doc(name, workspace, "${params.lr}")["spec"]
    return {
        "apiVersion": "opendlc.io/v1alpha1", "kind": "Experiment",
        "metadata": {"name": name, "workspace": workspace, "labels": {"example": "python"}},
        "spec": {
            "searchSpace": [{"name": "lr", "type": "float", "min": 0.01, "max": 0.9, "log": True}],
            "objective": {"metric": "loss", "direction": "minimize"},
            "algorithm": {"name": "random", "seed": 3},
            "maxTrials": trials, "parallelism": 2,
            "trialTemplate": template,
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workspace", "-w", default="default")
    ap.add_argument("--name", default="py-example", help="the job's name; the experiment's is NAME-tune")
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--keep", action="store_true", help="leave the job and the experiment in place")
    args = ap.parse_args()

    dlc = Client(workspace=args.workspace)
    me = dlc.whoami()
    print(f"{dlc.server} as {me.name} ({me.role})")
    tune = args.name + "-tune"
    for gone in (lambda: dlc.jobs.delete(args.name), lambda: dlc.experiments.delete(tune)):
        try:  # a previous run's
            gone()
        except NotFoundError:
            pass

    # 1. Submit, and follow the logs until the job ends.
    job = dlc.jobs.submit(job_doc(args.name, args.workspace, "0.1"))
    print(f"submitted job {job.workspace}/{job.name} ({job.uid})")
    for rec in dlc.jobs.logs(job.name, follow=True):
        print(f"  [{rec.replica}] {rec.line}")
    job = dlc.jobs.wait(job.name)
    print(f"job {job.name}: {job.phase} ({job.status.reason}), final loss {job.status.metrics.get('loss')}")
    if job.phase != "Succeeded":
        return 1

    # 2. Tune the learning rate: trials run like the job, with ${params.lr} filled in.
    exp = dlc.experiments.create(experiment_doc(tune, args.workspace, args.trials))
    exp = dlc.experiments.wait(exp.name)  # a progress bar on a terminal
    print(f"experiment {exp.name}: {exp.phase}; best trial {exp.status.best_trial} "
          f"lr={exp.status.best_params.get('lr')} loss={exp.status.best_value}")
    try:
        print(dlc.experiments.results(exp.name)[["phase", "value", "param.lr"]].to_string())
    except ImportError:  # no pandas: the same rows as dicts
        for row in dlc.experiments.trials(exp.name).records():
            print(row)

    if not args.keep:
        dlc.experiments.delete(tune)
        dlc.jobs.delete(args.name)
    return 0 if exp.phase == "Succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
