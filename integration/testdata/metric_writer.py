"""A trainer stand-in that logs its metrics the way a training library does, for the
metric collector tests (integration/metric_collectors_test.go).

    metric_writer.py FORMAT LR EPOCHS SLEEP

FORMAT is stdout (Keras' progress line), jsonl (to $METRICS_FILE, default
metrics.jsonl), lightning (Lightning's CSVLogger
metrics.csv), keras (Keras' CSVLogger training.log), hf (Hugging Face Trainer's
trainer_state.json in each checkpoint-<step>/ directory, the last two kept, and in out/
at the end) or s3-jsonl (JSON lines uploaded whole to the S3 object
$METRICS_URI after each epoch, with boto3, on the stack's S3: DLC_S3_ENDPOINT and the
AWS_* variables every replica gets). Each epoch e (from 1) logs accuracy(e) = LR * SHAPE[(e-1) % 4] and
latency(e) = LATENCY[(e-1) % 4]; the test computes the same. The files are written as
the libraries write them: csv.DictWriter rows ending in \\r\\n, Lightning's sorted header
rewritten when validation metrics first appear, trainer_state.json rewritten in place
with json.dumps(indent=2, sort_keys=True).
"""

import csv
import json
import os
import shutil
import sys
import time

SHAPE = [0.5, 0.9, 0.7, 0.8]
LATENCY = [100.0, 80.0, 120.0, 90.0]


def accuracy(lr, e):
    return round(lr * SHAPE[(e - 1) % 4], 6)


def latency(e):
    return LATENCY[(e - 1) % 4]


def stdout(lr, epochs, pause):
    for e in range(1, epochs + 1):
        time.sleep(pause)
        a = accuracy(lr, e)
        print(f"Epoch {e}/{epochs}", flush=True)
        print(f"100/100 [==============================] - 1s 5ms/step - loss: {1 - a:.4f} - acc: {a}", flush=True)


def jsonl(lr, epochs, pause):
    with open(os.environ.get("METRICS_FILE", "metrics.jsonl"), "w") as f:
        for e in range(1, epochs + 1):
            time.sleep(pause)
            row = {"step": e, "accuracy": accuracy(lr, e), "latency_ms": latency(e), "split": "eval"}
            f.write(json.dumps(row) + "\n")
            f.flush()


class LightningCSV:
    """Lightning's _ExperimentWriter: rows kept until save(); the header is the sorted
    union of the keys; new keys rewrite the file with the new header."""

    def __init__(self, path):
        self.path = path
        self.keys = []
        self.rows = []

    def log_metrics(self, metrics, step):
        row = dict(metrics)
        row["step"] = step
        self.rows.append(row)

    def save(self):
        if not self.rows:
            return
        current = set().union(*self.rows)
        new = current - set(self.keys)
        self.keys.extend(new)
        self.keys.sort()
        exists = os.path.isfile(self.path)
        if new and exists:
            with open(self.path, newline="") as f:
                old = list(csv.DictReader(f))
            with open(self.path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=self.keys)
                w.writeheader()
                w.writerows(old)
        with open(self.path, "a" if exists else "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.keys)
            if not exists:
                w.writeheader()
            w.writerows(self.rows)
        self.rows = []


def lightning(lr, epochs, pause):
    os.makedirs("lightning_logs/version_0", exist_ok=True)
    path = "lightning_logs/version_0/metrics.csv"
    if os.path.exists(path):
        os.remove(path)
    log = LightningCSV(path)
    for e in range(1, epochs + 1):
        time.sleep(pause)
        a = accuracy(lr, e)
        step = e * 10 - 1
        log.log_metrics({"epoch": e - 1, "train_loss": 1 - a + 0.05}, step)
        log.save()  # the training rows reach the file before validation has run
        log.log_metrics({"epoch": e - 1, "val_acc": a, "val_loss": 1 - a}, step)
        log.save()


def keras(lr, epochs, pause):
    with open("training.log", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["epoch", "accuracy", "loss", "val_accuracy", "val_loss"])
        w.writeheader()
        f.flush()
        for e in range(1, epochs + 1):
            time.sleep(pause)
            a = accuracy(lr, e)
            w.writerow({"epoch": e - 1, "accuracy": a + 0.01, "loss": 1 - a, "val_accuracy": a, "val_loss": 1.1 - a})
            f.flush()


def hf(lr, epochs, pause):
    shutil.rmtree("out", ignore_errors=True)
    os.makedirs("out")
    state = {"best_metric": None, "best_model_checkpoint": None, "epoch": 0.0, "eval_steps": 10, "global_step": 0,
             "is_hyper_param_search": False, "is_local_process_zero": True, "is_world_process_zero": True,
             "log_history": [], "logging_steps": 10, "max_steps": epochs * 10, "num_input_tokens_seen": 0,
             "num_train_epochs": epochs, "save_steps": 10, "total_flos": 0.0, "train_batch_size": 8,
             "trial_name": None, "trial_params": None}
    for e in range(1, epochs + 1):
        time.sleep(pause)
        a = accuracy(lr, e)
        step = e * 10
        state["log_history"].append({"epoch": float(e), "grad_norm": 1.5, "learning_rate": lr, "loss": 1 - a + 0.05, "step": step})
        state["log_history"].append({"epoch": float(e), "eval_accuracy": a, "eval_loss": 1 - a, "eval_runtime": 0.5,
                                     "eval_samples_per_second": 200.0, "eval_steps_per_second": 25.0, "step": step})
        state["epoch"], state["global_step"] = float(e), step
        # Trainer._save_checkpoint: the state goes into checkpoint-<step>/, and with
        # save_total_limit 2 the oldest checkpoint beyond two is removed.
        ckpt = f"out/checkpoint-{step}"
        os.makedirs(ckpt, exist_ok=True)
        with open(f"{ckpt}/trainer_state.json", "w") as f:
            f.write(json.dumps(state, indent=2, sort_keys=True) + "\n")
        if e > 2:
            shutil.rmtree(f"out/checkpoint-{step - 20}")
    with open("out/trainer_state.json", "w") as f:  # Trainer.save_state at the end
        f.write(json.dumps(state, indent=2, sort_keys=True) + "\n")


def s3_jsonl(lr, epochs, pause):
    import boto3
    from botocore.config import Config

    bucket, key = os.environ["METRICS_URI"][len("s3://"):].split("/", 1)
    s3 = boto3.client("s3", endpoint_url=os.environ["DLC_S3_ENDPOINT"], region_name=os.environ.get("AWS_REGION", "us-east-1"),
                      config=Config(s3={"addressing_style": "path"}))
    lines = []
    for e in range(1, epochs + 1):
        time.sleep(pause)
        lines.append(json.dumps({"step": e, "accuracy": accuracy(lr, e), "latency_ms": latency(e)}))
        s3.put_object(Bucket=bucket, Key=key, Body=("\n".join(lines) + "\n").encode())


if __name__ == "__main__":
    fmt, lr, epochs, pause = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    {"stdout": stdout, "jsonl": jsonl, "lightning": lightning, "keras": keras, "hf": hf, "s3-jsonl": s3_jsonl}[fmt](lr, epochs, pause)
