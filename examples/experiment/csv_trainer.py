"""A toy trainer for examples/experiment/collectors.yaml: it logs like PyTorch
Lightning's CSVLogger (metrics.csv, at --out, written with the csv module: a sorted header, training and validation rows at the same step with the other's
cells empty, the file rewritten when validation's columns first appear) and prints a
progress line per epoch."""

import argparse
import csv
import math
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, required=True)
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--out", default="lightning_logs/version_0/metrics.csv")
args = parser.parse_args()

path = args.out
os.makedirs(os.path.dirname(path), exist_ok=True)
keys, rows = [], []


def save(new_rows):
    """Append rows, rewriting the file first when they bring new columns."""
    global keys
    exists = os.path.isfile(path) and keys
    new = set().union(*new_rows) - set(keys)
    old = rows[:]
    rows.extend(new_rows)
    if new:
        keys = sorted(set(keys) | new)
    mode = "a" if exists and not new else "w"
    with open(path, mode, newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        if mode == "w":
            w.writeheader()
            w.writerows(old)
        w.writerows(new_rows)


# The validation accuracy peaks near lr = 0.05 and, at a too large rate, falls off late.
quality = math.exp(-((math.log10(args.lr) + 1.3) ** 2))
for epoch in range(args.epochs):
    time.sleep(0.5)
    step = (epoch + 1) * 100 - 1
    progress = 1 - 0.6 ** (epoch + 1)
    overfit = 0.02 * epoch * args.lr
    val_acc = round(0.5 + 0.45 * quality * progress - overfit, 4)
    train_loss = round(1.2 * (1 - progress * quality) + 0.05, 4)
    save([{"epoch": epoch, "step": step, "train_loss": train_loss}])
    save([{"epoch": epoch, "step": step, "val_acc": val_acc, "val_loss": round(1 - val_acc, 4)}])
    print(f"epoch {epoch}: train_loss={train_loss} val_acc={val_acc}", flush=True)
