"""The Python side of the cross-language tests (integration/python_test.go), run with
/usr/bin/python3 and PYTHONPATH=python against the stack's real S3 gateway. Each command
prints one JSON document on stdout for the Go test to check.

  read URI DEST       list, latest, and load the latest checkpoint into DEST
  load REF DEST       load one checkpoint; a failure is reported as {"error": class name}
  write URI SRC       save SRC (a directory) as steps 1 (save) and 2..4 (save_async)
  list URI            the complete steps
  prune URI KEEP      prune; the deleted steps
  report              print metric lines, including non-finite values
  env                 the parsed environment
  train STEPS         a training job: resume, report, checkpoint on rank 0
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import tempfile
from typing import Any, Dict, List

import opendlc
from opendlc.checkpoint import Checkpoints, CheckpointError, Manifest, format_go_time


def manifest_doc(m: Manifest) -> Dict[str, Any]:
    return {
        "step": m.step, "ref": m.ref, "time": format_go_time(m.time), "metrics": dict(m.metrics),
        "files": [dataclasses.asdict(f) for f in m.files],
    }


def store(uri: str) -> Checkpoints:
    # Parts of 5 MiB (S3's minimum), so that a file over 5 MiB goes up in several parts.
    return Checkpoints(uri, multipart_threshold=5 << 20, multipart_chunksize=5 << 20)


def cmd_read(uri: str, dest: str) -> Dict[str, Any]:
    ck = store(uri)
    latest = ck.latest()
    out: Dict[str, Any] = {"list": [m.step for m in ck.list()], "latest": latest and manifest_doc(latest)}
    if latest is not None:
        out["loaded"] = manifest_doc(ck.load(latest.ref, dest))
    return out


def cmd_load(ref: str, dest: str) -> Dict[str, Any]:
    try:
        return {"loaded": manifest_doc(store(ref.rsplit("/", 1)[0]).load(ref, dest))}
    except CheckpointError as e:
        return {"error": type(e).__name__, "message": str(e)}


def cmd_write(uri: str, src: str) -> Dict[str, Any]:
    ck = store(uri)
    first = ck.save(1, src, {"loss": 1.0})
    for step in (2, 3, 4):
        ck.save_async(step, src, {"loss": 1.0 / step, "step_squared": step * step})
    return {"manifests": [manifest_doc(m) for m in [first] + ck.wait()]}


def cmd_report() -> Dict[str, Any]:
    lines: List[str] = [
        opendlc.report(1, loss=0.41, accuracy=0.87, tokens=123456789012),
        opendlc.report(2, loss=1e-05, big=1.5e300, neg=-0.125),
        opendlc.report(3, loss=math.nan, up=math.inf, down=-math.inf, accuracy=0.5),
    ]
    return {"lines": lines}


def cmd_env() -> Dict[str, Any]:
    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if hasattr(v, "keys"):
            return {k: plain(v[k]) for k in v.keys()}
        if v is None or isinstance(v, (str, int, float, bool, list)):
            return v
        return str(v)

    e = opendlc.env()
    doc = plain(e)
    doc["checkpoint_every_seconds"] = e.checkpoint_every.total_seconds() if e.checkpoint_every else None
    doc["s3"].pop("secret_key")
    return doc


def cmd_train(steps: int) -> None:
    """Resumes from DLC_RESUME_FROM, reports every step (step 2's loss is NaN) and, on
    rank 0, saves each step's state asynchronously; the last line says where it started."""
    e = opendlc.env()
    start, state = 0, {"job": e.job, "attempt": e.attempt, "world_size": e.rendezvous.world_size, "total": 0}
    with tempfile.TemporaryDirectory() as d:
        m = opendlc.resume(d)
        if m is not None:
            with open(os.path.join(d, "state.json")) as f:
                state = json.load(f)
            start = m.step
    for step in range(start + 1, steps + 1):
        state["total"] += step
        opendlc.report(step, loss=math.nan if step == 2 else 1.0 / step, total=state["total"])
        if e.is_leader:
            stage = tempfile.mkdtemp()
            with open(os.path.join(stage, "state.json"), "w") as f:
                json.dump(state, f)
            opendlc.save_async(step, stage, {"loss": 1.0 / step}, delete_after=True)
    if e.is_leader:
        opendlc.wait()
    print(f"trained from step {start} to {steps}", flush=True)


def main(argv: List[str]) -> int:
    cmd, args = argv[0], argv[1:]
    if cmd == "train":
        cmd_train(int(args[0]))
        return 0
    if cmd == "read":
        out = cmd_read(args[0], args[1])
    elif cmd == "load":
        out = cmd_load(args[0], args[1])
    elif cmd == "write":
        out = cmd_write(args[0], args[1])
    elif cmd == "list":
        out = {"list": [m.step for m in store(args[0]).list()]}
    elif cmd == "prune":
        out = {"deleted": store(args[0]).prune(int(args[1]))}
    elif cmd == "report":
        out = cmd_report()
    elif cmd == "env":
        out = cmd_env()
    else:
        print(f"unknown command {cmd!r}", file=sys.stderr)
        return 2
    print("crosslang:" + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
