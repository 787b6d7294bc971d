import math
import os
import subprocess
import sys
import threading

import pytest

from opendlc import print_line, report
from opendlc.metrics import format_metric_line


def test_report_prints_the_line_and_flushes(capsys):
    line = report(120, loss=0.41, accuracy=0.87)
    assert line == "dlc:metric step=120 loss=0.41 accuracy=0.87"
    assert capsys.readouterr().out == line + "\n"


def test_print_line_writes_each_line_whole():
    # Two processes share one pipe under PYTHONUNBUFFERED=1, as torchrun's ranks share a
    # replica's stream, and print many lines at once: every line arrives whole.
    prog = (
        "import sys; sys.path.insert(0, sys.argv[2]); import opendlc\n"
        "for i in range(2000): opendlc.print_line(f'{sys.argv[1]} line {i} ' + 'x' * 40)\n"
    )
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    r, w = os.pipe()
    procs = [subprocess.Popen([sys.executable, "-c", prog, name, pkg], stdout=w, env=env) for name in ("a", "b")]
    os.close(w)
    with os.fdopen(r) as out:
        lines = out.read().splitlines()
    for p in procs:
        assert p.wait() == 0
    assert len(lines) == 4000
    for line in lines:
        name, word, _, tail = line.split(" ")
        assert name in ("a", "b") and word == "line" and tail == "x" * 40, line
    assert print_line("plain") == "plain"


def test_values_read_back_exactly():
    values = {"a": 0.1 + 0.2, "b": 1e-05, "c": 1e300, "d": -2.5, "e": 7, "f": 2**60}
    line = format_metric_line(3, values)
    fields = dict(f.split("=", 1) for f in line.split()[1:])
    assert fields["step"] == "3"
    assert fields["e"] == "7" and fields["f"] == str(2**60)
    for k, v in values.items():
        assert float(fields[k]) == v


def test_non_finite_values_are_quoted_so_the_forwarder_skips_them():
    line = format_metric_line(5, {"loss": math.nan, "up": math.inf, "down": -math.inf, "acc": 0.5})
    assert line == 'dlc:metric step=5 loss="nan" up="inf" down="-inf" acc=0.5'


class Scalar:  # like numpy scalars and 0-dim tensors: only __float__
    def __float__(self) -> float:
        return 0.25


def test_float_convertible_values():
    assert format_metric_line(1, {"x": Scalar()}) == "dlc:metric step=1 x=0.25"


@pytest.mark.parametrize("metrics,error", [
    ({"bad name": 1.0}, ValueError),
    ({"a=b": 1.0}, ValueError),
    ({"": 1.0}, ValueError),
    ({"step": 2}, ValueError),
    ({"s": "0.5"}, TypeError),
    ({"b": True}, TypeError),
    ({"n": None}, TypeError),
])
def test_rejects_what_the_forwarder_would_misread(metrics, error):
    with pytest.raises(error):
        format_metric_line(1, metrics)


def test_step_must_be_an_int():
    with pytest.raises(TypeError):
        format_metric_line(1.5, {})  # type: ignore[arg-type]


def test_lines_from_threads_never_interleave(capsys):
    def worker(i: int) -> None:
        for s in range(200):
            report(s, worker=i, value=s * 0.5)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 800
    for line in lines:
        fields = line.split()
        assert fields[0] == "dlc:metric" and len(fields) == 4, line
