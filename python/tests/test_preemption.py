"""opendlc.preemption: real signals, to this process (the handler's bookkeeping) and to a
training loop in a child process (the final checkpoint and the exit status). The child
checkpoints to the in-memory S3 of fake_s3.py and writes what it holds to a file at exit,
which the test reads back through Checkpoints."""

import base64
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import List, Optional

import pytest

from fake_s3 import FakeS3
from opendlc import Notice, on_notice
from opendlc.checkpoint import Checkpoints
from opendlc.preemption import format_notice_line

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.dirname(HERE)

# ---- the handler, in this process (pytest runs tests in the main thread) ----


@pytest.fixture
def sigusr_handlers():
    """Restores SIGUSR1/SIGUSR2 after the test, whatever it installed."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_a_signal_only_sets_the_flag_and_restore_puts_back_the_handler(sigusr_handlers):
    calls: List[int] = []
    previous = lambda signum, frame: calls.append(signum)  # noqa: E731
    signal.signal(signal.SIGUSR1, previous)
    n = on_notice([signal.SIGUSR1])
    assert not n.requested and n.signal is None and n.elapsed() is None
    assert signal.getsignal(signal.SIGUSR1) != previous
    before = time.time()
    signal.raise_signal(signal.SIGUSR1)
    assert n.requested and n.signal == signal.SIGUSR1
    assert calls == [], "the first signal reached the previous handler"
    assert n.received_at is not None and before <= n.received_at <= time.time()
    assert n.elapsed() is not None and n.elapsed() >= 0
    assert n.exit_code == 128 + signal.SIGUSR1
    n.restore()
    assert signal.getsignal(signal.SIGUSR1) is previous
    assert n.requested, "restore keeps the notice"


def test_a_second_signal_goes_to_the_previous_handler(sigusr_handlers):
    calls: List[int] = []
    previous = lambda signum, frame: calls.append(signum)  # noqa: E731
    signal.signal(signal.SIGUSR2, previous)
    with Notice([signal.SIGUSR1, signal.SIGUSR2]) as n:
        signal.raise_signal(signal.SIGUSR2)
        assert n.requested and calls == []
        signal.raise_signal(signal.SIGUSR2)  # not deferred: the previous handler gets it
        assert calls == [signal.SIGUSR2]
        assert signal.getsignal(signal.SIGUSR2) is previous, "the previous handler stays after a second signal"
        assert n.signal == signal.SIGUSR2
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGUSR2) is previous


def test_sigint_twice_raises_keyboard_interrupt():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with Notice() as n:
        signal.raise_signal(signal.SIGINT)  # the first Ctrl-C: a notice
        assert n.requested and n.signal == signal.SIGINT and n.exit_code == 130
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)  # the second: Python's default
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_only_in_the_main_thread():
    errors: List[BaseException] = []

    def worker() -> None:
        try:
            on_notice()
        except BaseException as e:  # noqa: B902
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError), errors
    assert "main thread" in str(errors[0])
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, "nothing was installed"


def test_no_exit_code_and_no_notice_line_before_a_signal(sigusr_handlers):
    with Notice([signal.SIGUSR1]) as n:
        with pytest.raises(RuntimeError, match="no signal"):
            n.exit_code
        with pytest.raises(RuntimeError, match="no signal"):
            n.announce(3)
        with pytest.raises(RuntimeError, match="installed already"):
            n.install()


def test_notice_line():
    assert format_notice_line(signal.SIGTERM, 120) == "dlc:notice signal=SIGTERM step=120"
    assert format_notice_line(2, 7) == "dlc:notice signal=SIGINT step=7"
    with pytest.raises(TypeError):
        format_notice_line(signal.SIGTERM, 1.5)  # type: ignore[arg-type]


def test_checkpoint_without_exit_saves_after_the_queued_saves(s3, capsys, sigusr_handlers):
    ck = Checkpoints("s3://ckpt/t", client=s3)
    with Notice([signal.SIGUSR1]) as n:
        ck.save_async(10, {"state.json": b"10"})
        signal.raise_signal(signal.SIGUSR1)
        m = n.checkpoint(12, {"state.json": b"12"}, {"loss": 0.5}, checkpoints=ck, exit=False)
    assert m.step == 12 and m.ref == "s3://ckpt/t/000000000012" and dict(m.metrics) == {"loss": 0.5}
    assert [x.step for x in ck.list()] == [10, 12]
    manifests = [k for k in s3.puts if k.endswith("MANIFEST.json")]
    assert manifests == ["t/000000000010/MANIFEST.json", "t/000000000012/MANIFEST.json"]
    assert capsys.readouterr().out == (
        "dlc:notice signal=SIGUSR1 step=12\n"
        "dlc:checkpoint step=12 uri=s3://ckpt/t/000000000012\n")


def test_finish_exits_with_128_plus_the_signal(capsys, sigusr_handlers):
    with Notice([signal.SIGUSR1]) as n:
        signal.raise_signal(signal.SIGUSR1)
        with pytest.raises(SystemExit) as e:
            n.finish(4)  # a rank that does not save
    assert e.value.code == 128 + signal.SIGUSR1
    assert capsys.readouterr().out == "dlc:notice signal=SIGUSR1 step=4\n"


# ---- a training loop in a child process, sent a real SIGTERM ----

LOOP = textwrap.dedent("""
    import base64, json, os, sys, atexit, tempfile, time
    sys.path[:0] = [{lib!r}, {tests!r}]
    from fake_s3 import FakeS3
    import opendlc

    dump = os.environ["DUMP"]
    s3 = FakeS3(["ckpt"])
    if os.path.exists(dump):  # what an earlier run left in S3
        with open(dump) as f:
            s3.objects["ckpt"] = {{k: base64.b64decode(v) for k, v in json.load(f).items()}}

    def save_dump():
        with open(dump, "w") as f:
            json.dump({{k: base64.b64encode(v).decode() for k, v in s3.objects["ckpt"].items()}}, f)
    atexit.register(save_dump)  # runs on SystemExit too, after the saves have ended

    ck = opendlc.Checkpoints("s3://ckpt/run", client=s3)
    notice = opendlc.on_notice()
    start, w = 0, 0.0
    if os.environ.get("RESUME"):
        d = tempfile.mkdtemp()
        m = ck.load(os.environ["RESUME"], d)
        with open(os.path.join(d, "state.json")) as f:
            state = json.load(f)
        start, w = m.step, state["w"]
        print(f"resumed from {{m.ref}} at step {{start}}", flush=True)

    def state(step):
        return {{"state.json": json.dumps({{"step": step, "w": w}}).encode()}}

    for step in range(start + 1, int(os.environ["STEPS"]) + 1):
        w += 0.5  # the training: after step s, w is s / 2
        time.sleep(0.05)
        opendlc.report(step, w=w)
        if step % 10 == 0:
            ck.save_async(step, state(step))
        if notice.requested:
            notice.checkpoint(step, state(step), {{"w": w}}, checkpoints=ck)
    ck.wait()
    print("done", flush=True)
""")

METRIC = re.compile(r"^dlc:metric step=(\d+) ")


class Loop:
    def __init__(self, tmp_path, steps: int, resume: Optional[str] = None) -> None:
        script = tmp_path / "loop.py"
        script.write_text(LOOP.format(lib=LIB, tests=HERE))
        self.dump = tmp_path / "s3.json"
        env = {"PATH": os.environ.get("PATH", ""), "DUMP": str(self.dump), "STEPS": str(steps),
               "PYTHONUNBUFFERED": "1"}
        if resume:
            env["RESUME"] = resume
        self.proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: List[str] = []

    def read_until(self, pattern: str, timeout: float = 60) -> None:
        """Reads lines until one matches pattern."""
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"the loop ended before {pattern!r}:\n" + "".join(self.lines))
            self.lines.append(line)
            if re.search(pattern, line):
                return
        raise AssertionError(f"no {pattern!r} within {timeout}s:\n" + "".join(self.lines))

    def finish(self, timeout: float = 60) -> int:
        assert self.proc.stdout is not None
        out, _ = self.proc.communicate(timeout=timeout)
        self.lines += out.splitlines(keepends=True)
        return self.proc.returncode

    def output(self) -> List[str]:
        return [line.rstrip("\n") for line in self.lines]

    def s3(self) -> FakeS3:
        s3 = FakeS3(["ckpt"])
        s3.objects["ckpt"] = {k: base64.b64decode(v) for k, v in json.loads(self.dump.read_text()).items()}
        return s3


def steps_reported(lines: List[str]) -> List[int]:
    return [int(m.group(1)) for m in (METRIC.match(line) for line in lines) if m]


def test_sigterm_makes_a_final_checkpoint_and_resume_continues_after_it(tmp_path):
    first = Loop(tmp_path, steps=10_000)
    try:
        first.read_until(r"^dlc:metric step=13 ")
        first.proc.send_signal(signal.SIGTERM)
        rc = first.finish()
    finally:
        first.proc.kill()
    out = first.output()
    assert rc == 143, "\n".join(out)
    notices = [i for i, line in enumerate(out) if line.startswith("dlc:notice ")]
    assert len(notices) == 1, out
    m = re.fullmatch(r"dlc:notice signal=SIGTERM step=(\d+)", out[notices[0]])
    assert m, out[notices[0]]
    step = int(m.group(1))
    reported = steps_reported(out)
    assert 13 <= step < 10_000 and reported[-1] == step, (step, reported)
    ref = f"s3://ckpt/run/{step:012d}"
    # The checkpoint line of that step follows the notice line, and is the last line.
    assert out[notices[0] + 1:] == [f"dlc:checkpoint step={step} uri={ref}"], out
    assert "done" not in out

    ck = Checkpoints("s3://ckpt/run", client=first.s3())
    latest = ck.latest()
    assert latest is not None and latest.step == step and latest.ref == ref
    assert dict(latest.metrics) == {"w": step / 2}
    ck.load(ref, tmp_path / "final")
    assert json.loads((tmp_path / "final" / "state.json").read_text()) == {"step": step, "w": step / 2}
    assert [x.step for x in ck.list()] == [s for s in (10, 20) if s < step] + [step]

    second = Loop(tmp_path, steps=step + 3, resume=ref)
    rc = second.finish()
    out2 = second.output()
    assert rc == 0, "\n".join(out2)
    assert f"resumed from {ref} at step {step}" in out2
    assert steps_reported(out2) == [step + 1, step + 2, step + 3]
    assert out2[-1] == "done" and not any(line.startswith("dlc:notice") for line in out2)


def test_sigint_exits_130(tmp_path):
    loop = Loop(tmp_path, steps=10_000)
    try:
        loop.read_until(r"^dlc:metric step=2 ")
        loop.proc.send_signal(signal.SIGINT)
        rc = loop.finish()
    finally:
        loop.proc.kill()
    out = loop.output()
    assert rc == 130, "\n".join(out)
    step = int(re.search(r"dlc:notice signal=SIGINT step=(\d+)", "\n".join(out)).group(1))  # type: ignore[union-attr]
    assert out[-1] == f"dlc:checkpoint step={step} uri=s3://ckpt/run/{step:012d}"
    ck = Checkpoints("s3://ckpt/run", client=loop.s3())
    assert ck.latest() is not None and ck.latest().step == step  # type: ignore[union-attr]
