"""opendlc.torch with a stand-in torch module (pickle for torch.save/torch.load), so the
helper's logic is tested where PyTorch is not installed; with PyTorch installed, the real
module is used as well."""

import pickle
import time
import sys
import types

import pytest

from opendlc.checkpoint import Checkpoints, CorruptCheckpoint


def fake_torch() -> types.ModuleType:
    m = types.ModuleType("torch")
    m.save = lambda obj, path: pickle.dump(obj, open(path, "wb"))  # type: ignore[attr-defined]
    m.load = lambda path, map_location=None: pickle.load(open(path, "rb"))  # type: ignore[attr-defined]
    return m


@pytest.fixture(params=["stand-in", "real"])
def torch_module(request, monkeypatch):
    if request.param == "real":
        real = pytest.importorskip("torch")  # optional dependency
        return real
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    return sys.modules["torch"]


def test_save_state_then_load_state(s3, torch_module, monkeypatch):
    from opendlc import torch as dlc_torch

    ck = Checkpoints("s3://ckpt/t", client=s3)
    state = {"w": [1.0, 2.0], "epoch": 3}
    fut = dlc_torch.save_state(10, state, {"loss": 0.5}, checkpoints=ck)
    state["w"].append(99.0)  # training goes on: the saved state was serialized at the call
    m = fut.result(10)
    assert [f.name for f in m.files] == ["state.pt"] and dict(m.metrics) == {"loss": 0.5}

    monkeypatch.setenv("DLC_RESUME_FROM", "")
    assert dlc_torch.load_state(checkpoints=ck) is None, "a fresh start"
    monkeypatch.setenv("DLC_RESUME_FROM", m.ref)
    got = dlc_torch.load_state(checkpoints=ck)
    assert got is not None
    manifest, loaded = got
    assert manifest.step == 10
    assert loaded["epoch"] == 3 and list(loaded["w"]) == [1.0, 2.0]


def test_load_state_of_a_checkpoint_without_state_pt(s3, torch_module):
    from opendlc import torch as dlc_torch

    ck = Checkpoints("s3://ckpt/t", client=s3)
    ck.save(1, {"other.bin": b"x"})
    with pytest.raises(CorruptCheckpoint, match="state.pt"):
        dlc_torch.load_state(1, checkpoints=ck)


def test_the_temporary_file_is_deleted_after_upload(s3, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    from opendlc import torch as dlc_torch

    dlc_torch.save_state(1, {"a": 1}, checkpoints=Checkpoints("s3://ckpt/t", client=s3)).result(10)
    assert list(tmp_path.iterdir()) == []


def test_without_torch_the_error_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    from opendlc import torch as dlc_torch

    with pytest.raises(ImportError, match="PyTorch"):
        dlc_torch.load_state(1)


def test_save_on_notice(s3, torch_module, capsys):
    import signal

    from opendlc import Notice
    from opendlc import torch as dlc_torch

    ck = Checkpoints("s3://ckpt/t", client=s3)
    saved = signal.getsignal(signal.SIGUSR1)
    try:
        with Notice([signal.SIGUSR1]) as n:
            signal.raise_signal(signal.SIGUSR1)
            m = dlc_torch.save_on_notice(n, 7, {"w": [7.0]}, {"loss": 0.25}, checkpoints=ck, exit=False)
    finally:
        signal.signal(signal.SIGUSR1, saved)
    assert m.step == 7 and [f.name for f in m.files] == ["state.pt"] and dict(m.metrics) == {"loss": 0.25}
    assert capsys.readouterr().out == "dlc:notice signal=SIGUSR1 step=7\ndlc:checkpoint step=7 uri=s3://ckpt/t/000000000007\n"
    got = dlc_torch.load_state(m.ref, checkpoints=ck)
    assert got is not None and list(got[1]["w"]) == [7.0]


RANK_LOOP = """
import os, sys, time
sys.path[:0] = [{lib!r}, {tests!r}]
import torch.distributed as dist
import opendlc
from opendlc import torch as dlc_torch
from fake_s3 import FakeS3

dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
notice = opendlc.on_notice()
print("ready", flush=True)
for step in range(1, 100_000):
    time.sleep(0.02 * (1 + rank))  # the ranks reach their checks at different moments
    if dlc_torch.notice_agreed(notice):
        print(f"rank {{rank}} stops after step {{step}}: signal {{notice.signal.name}}", flush=True)
        if rank == 0:
            s3 = FakeS3(["ckpt"])
            m = dlc_torch.save_on_notice(notice, step, {{"step": step}},
                                         checkpoints=opendlc.Checkpoints("s3://ckpt/run", client=s3), exit=False)
            assert s3.keys("ckpt", "run/") == [f"{{step:012d}}/MANIFEST.json", f"{{step:012d}}/state.pt"], s3.keys("ckpt")
        notice.exit()
"""


def test_notice_agreed_stops_every_rank_after_the_same_step(tmp_path):
    pytest.importorskip("torch")  # optional dependency
    import os
    import re
    import signal
    import socket
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    script = tmp_path / "rank.py"
    script.write_text(RANK_LOOP.format(lib=os.path.dirname(here), tests=here))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = {"PATH": os.environ.get("PATH", ""), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "WORLD_SIZE": "2", "RANK": str(rank), "GLOO_SOCKET_IFNAME": "lo"}
        procs.append(subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, env=env))
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            assert line == "ready\n", line + p.stdout.read()
        time.sleep(0.3)
        procs[1].send_signal(signal.SIGTERM)  # only rank 1 is told
        outs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [143, 143], outs
    stops = [re.search(r"rank (\d) stops after step (\d+): signal SIGTERM", out) for out in outs]
    assert all(stops), outs
    step = int(stops[0].group(2))  # type: ignore[union-attr]
    assert int(stops[1].group(2)) == step, outs  # type: ignore[union-attr]
    assert f"dlc:notice signal=SIGTERM step={step}\ndlc:checkpoint step={step} uri=s3://ckpt/run/{step:012d}\n" in outs[0]
    assert "dlc:" not in outs[1]
