"""A real OpenDLC stack for the client's tests: the working tree's `dlc`, built with
`go build` (or $DLC_BIN), running `dlc up` in a temporary state directory on free
loopback ports, for the whole pytest session. Local jobs run without the sandbox and
with --trust-local-jobs, so that any machine (root or not, bubblewrap or not) can run
the tests and the admin can give tokens to a second workspace."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# The first start on a machine builds Temporal and the S3 gateway from source.
START_TIMEOUT = float(os.environ.get("DLC_UP_TIMEOUT", "900"))


@dataclass
class Stack:
    url: str
    admin_token: str
    # xdg_state_home holds opendlc/ (the state directory): with XDG_STATE_HOME set to it,
    # the CLI and the client find the admin token where `dlc up` wrote it.
    xdg_state_home: str
    state_dir: str
    dlc: str
    workdir: str
    log: str

    def env(self, **extra: str) -> dict:
        """An environment with no DLC_* variables of the caller's, plus extra."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("DLC_")}
        env.update(extra)
        return env


def _build(out_dir: str) -> str:
    if os.environ.get("DLC_BIN"):
        return os.path.abspath(os.environ["DLC_BIN"])
    go = shutil.which("go")
    if go is None:
        raise pytest.UsageError("the client tests build dlc with Go (`go` not found), or set DLC_BIN to a built dlc")
    out = os.path.join(out_dir, "dlc")
    res = subprocess.run([go, "build", "-o", out, "./cmd/dlc"], cwd=REPO, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"go build ./cmd/dlc failed:\n{res.stdout}{res.stderr}")
    return out


def _tail(path: str, n: int = 4000) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def start(tmp: str) -> "tuple[Stack, subprocess.Popen]":
    dlc = _build(tmp)
    xdg = os.path.join(tmp, "xdg")
    state = os.path.join(xdg, "opendlc")
    work = os.path.join(tmp, "work")
    os.makedirs(state)
    os.makedirs(work)
    out_path, err_path = os.path.join(tmp, "up.out"), os.path.join(tmp, "up.err")
    cmd = [dlc, "up", "--dir", state, "--addr", "127.0.0.1:0", "--s3-addr", "127.0.0.1:0", "--ui=false",
           "--workdir", work, "--local-sandbox=false", "--trust-local-jobs"]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, cwd=work, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env={k: v for k, v in os.environ.items() if not k.startswith("DLC_")},
                                start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT
    url: Optional[str] = None
    while url is None:
        m = re.search(r"^\s+API\s+(http\S+)", _tail(out_path, 100000), re.M)
        if m:
            url = m.group(1)
            break
        if proc.poll() is not None:
            raise RuntimeError(f"dlc up exited with {proc.returncode}:\n{_tail(err_path)}")
        if time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"dlc up did not come up in {START_TIMEOUT:g}s:\n{_tail(err_path)}")
        time.sleep(0.2)
    with open(os.path.join(state, "admin-token")) as f:
        token = f.read().strip()
    return Stack(url=url, admin_token=token, xdg_state_home=xdg, state_dir=state, dlc=dlc, workdir=work,
                 log=err_path), proc


def stop(proc: subprocess.Popen, grace: float = 60.0) -> int:
    """Interrupt `dlc up` as Ctrl-C does and wait for its clean shutdown; kill its
    process group if it does not end in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    try:  # anything of the group still there (a server dlc up started)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return proc.returncode


@pytest.fixture(scope="session")
def dlc_stack():
    tmp = tempfile.mkdtemp(prefix="opendlc-pyclient-")
    stack, proc = start(tmp)
    try:
        yield stack
    finally:
        rc = stop(proc)
        if rc not in (0, -signal.SIGINT):
            print(f"dlc up ended with {rc}:\n{_tail(stack.log)}")
        shutil.rmtree(tmp, ignore_errors=True)
