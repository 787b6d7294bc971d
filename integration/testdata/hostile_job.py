"""A hostile member's job (issue 33, finding 1): it goes after the stack's secrets and
its control plane from inside a replica, and prints whatever it gets.

    hostile_job.py STATE_DIR FILE... -- HOST:PORT...

It prints one line per finding:

    uid N
    read PATH: ok CONTENT          (CONTENT: JSON, at most 8 KiB of the file)
    read PATH: error WHY
    proc PID environ|cmdline: CONTENT
    connect HOST:PORT: ok | error WHY

reading every file under STATE_DIR, each FILE (the admin token's, the NATS passwords'),
the environment and command line of every process it can see, and connecting to each
HOST:PORT (Temporal, NATS, the API). It always exits 0: the test judges what it printed.
"""

import json
import os
import socket
import sys


def show(data):
    return json.dumps(data[:8192].decode("utf-8", "replace"))


def read(path):
    try:
        with open(path, "rb") as f:
            print(f"read {path}: ok {show(f.read(8192))}", flush=True)
    except OSError as e:
        print(f"read {path}: error {e.strerror}", flush=True)


def main():
    args = sys.argv[1:]
    sep = args.index("--")
    state, files, addrs = args[0], args[1:sep], args[sep + 1:]
    print(f"uid {os.getuid()}", flush=True)
    if not os.path.exists(state):
        print(f"read {state}: error not there", flush=True)
    for root, _, names in os.walk(state, onerror=lambda e: print(f"read {e.filename}: error {e.strerror}", flush=True)):
        for n in names:
            read(os.path.join(root, n))
    for f in files:
        read(f)
    for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
        for what in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{what}", "rb") as f:
                    print(f"proc {pid} {what}: {show(f.read().replace(bytes(1), b' '))}", flush=True)
            except OSError:
                pass
    for a in addrs:
        host, port = a.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=3).close()
            print(f"connect {a}: ok", flush=True)
        except OSError as e:
            print(f"connect {a}: error {e}", flush=True)


main()
