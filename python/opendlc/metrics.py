"""Metric lines: what the log forwarder turns into opendlc.job.metric.v1 events.

The forwarder (Go's events.ParseMetricLine) reads `dlc:metric step=120 loss=0.41` on
stdout or stderr: fields after the prefix, split on white space, each key=value with the
value parsed by strconv.ParseFloat; a value that does not parse is ignored.

Non-finite values: report() writes a non-finite value quoted (loss="nan", loss="inf",
loss="-inf"), which the forwarder reads as NaN or an infinity and carries in the metric
event as the JSON string "NaN", "Infinity" or "-Infinity" (docs/events.md).
"""

from __future__ import annotations

import math
import re
import sys
import threading
from typing import SupportsFloat, Union

__all__ = ["PREFIX", "report", "format_metric_line"]

PREFIX = "dlc:metric"

_KEY = re.compile(r"[^\s=\"]+\Z")
_lock = threading.Lock()

Number = Union[int, float, SupportsFloat]


def _format_value(key: str, v: Number) -> str:
    if isinstance(v, bool):
        raise TypeError(f"metric {key!r} is a bool; report a number")
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (str, bytes)) or not hasattr(v, "__float__"):
        raise TypeError(f"metric {key!r} is a {type(v).__name__}, not a number")
    x = float(v)  # floats, numpy scalars, 0-dim tensors
    if math.isnan(x):
        return '"nan"'
    if math.isinf(x):
        return '"inf"' if x > 0 else '"-inf"'
    return repr(x)  # the shortest form that reads back as the same float64


def format_metric_line(step: int, metrics: dict[str, Number]) -> str:
    """The metric line for step and metrics, without its newline."""
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError(f"step must be an int, not {type(step).__name__}")
    parts = [PREFIX, f"step={step}"]
    for key, v in metrics.items():
        if not _KEY.match(key):
            raise ValueError(f"metric name {key!r} must be non-empty, without spaces, '=' or '\"'")
        if key == "step":
            raise ValueError("the step is the first argument, not a metric")
        parts.append(f"{key}={_format_value(key, v)}")
    return " ".join(parts)


def report(step: int, /, **metrics: Number) -> str:
    """Prints `dlc:metric step=<step> name=value ...` to stdout as one line and flushes
    it, so that OpenDLC records the metrics. Returns the line (without its newline)."""
    return print_line(format_metric_line(step, metrics))


def print_line(line: str) -> str:
    """Writes `line` and its newline to stdout in one write and flushes it; returns the
    line. OpenDLC runs Python with PYTHONUNBUFFERED=1, under which `print()` writes the
    text and the newline apart, so processes sharing a replica's stream (torchrun's
    ranks on one node) could run their lines into each other; threads of one process
    never interleave within a line either."""
    out = sys.stdout
    with _lock:
        out.write(line + "\n")
        out.flush()
    return line
