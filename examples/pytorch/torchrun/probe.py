"""Shows what torchrun would resolve inside an OpenDLC replica when given no rendezvous
flags: torchrun's own argument parser (torch.distributed.run.get_args_parser) reads its
defaults from the PET_* variables OpenDLC's pytorch framework sets. Prints one line,

    torchrun resolves: nnodes=N node_rank=R master_addr=A master_port=P nproc_per_node=K rdzv_backend=B

and the same values as the replica's environment gives them (MASTER_ADDR, MASTER_PORT,
NODE_RANK), so a test can check one against the other and against the gang.
"""

import os
import platform
import sys

import torch
from torch.distributed.run import get_args_parser


def main() -> None:
    script = sys.argv[1] if len(sys.argv) > 1 else "train.py"
    a = get_args_parser().parse_args([script])  # no flags at all
    print(f"torchrun resolves: nnodes={a.nnodes} node_rank={a.node_rank} master_addr={a.master_addr} "
          f"master_port={a.master_port} nproc_per_node={a.nproc_per_node} rdzv_backend={a.rdzv_backend}", flush=True)
    print(f"versions: torch={torch.__version__} python={platform.python_version()}", flush=True)
    print(f"replica env: MASTER_ADDR={os.environ.get('MASTER_ADDR', '')} MASTER_PORT={os.environ.get('MASTER_PORT', '')} "
          f"NODE_RANK={os.environ.get('NODE_RANK', '')} WORLD_SIZE={os.environ.get('WORLD_SIZE', '')}", flush=True)


if __name__ == "__main__":
    main()
