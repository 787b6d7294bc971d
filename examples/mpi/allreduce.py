#!/usr/bin/env python3
"""An MPI program for OpenDLC's mpi framework: every rank says where it runs, the ranks
sum rank+1 with MPI_Allreduce, and rank 0 prints the sum with what it gathered.

mpirun starts it (see launch.sh), so the ranks know each other through MPI alone; each
prints one line

  mpi-rank {"rank": 1, "size": 3, "host": "...", "pid": 4242}

and rank 0 one more

  mpi-result {"size": 3, "sum": 6, "expected": 6, "ranks": [0, 1, 2], "hosts": [...]}

with expected the sum 1+2+...+size that the allreduce must give. Needs mpi4py (Debian:
python3-mpi4py, with openmpi-bin).
"""

from __future__ import annotations

import json
import os
import sys

from mpi4py import MPI


def emit(tag: str, doc: dict) -> None:
    """Prints one line "<tag> <json>" with a single write. mpirun forwards every rank's
    output to its own as it comes, so a line written in pieces (print() writes the text
    and the newline apart when stdout is unbuffered, as PYTHONUNBUFFERED makes it) could
    be cut by another rank's line."""
    sys.stdout.write(tag + " " + json.dumps(doc, sort_keys=True) + "\n")
    sys.stdout.flush()


def main() -> None:
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    host = MPI.Get_processor_name()
    me = {"rank": rank, "size": size, "host": host, "pid": os.getpid()}
    emit("mpi-rank", me)

    total = comm.allreduce(rank + 1, op=MPI.SUM)
    everyone = comm.gather(me, root=0)
    if rank == 0:
        assert everyone is not None
        expected = size * (size + 1) // 2
        result = {
            "size": size,
            "sum": total,
            "expected": expected,
            "ranks": [p["rank"] for p in everyone],
            "hosts": [p["host"] for p in everyone],
        }
        emit("mpi-result", result)
        if total != expected:
            sys.exit(f"allreduce gave {total}, want {expected}")


if __name__ == "__main__":
    main()
