"""The retraining example's small programs: they run as job steps of the retrain
pipeline (examples/retraining/template.yaml), from the repository root, with the
workspace's S3 credentials the platform gives every replica.

    model_record.py prepare  OUT_URI           write a new shard of data to OUT_URI
    model_record.py current  RECORD_URI        report the production model's accuracy (0 with none)
    model_record.py promote  RECORD_URI ACCURACY CHECKPOINT RUN
                                                record a model as the one in production

The production record is one JSON object in S3: {"accuracy": 0.91, "checkpoint":
"s3://...", "run": "<pipeline run>", "time": "<UTC>"}. promote writes it only if the
accuracy beats what it holds, so two runs promoting at once keep the better model.
"""
import json
import random
import sys
import time
from urllib.parse import urlparse

from opendlc.checkpoint import _is_not_found, s3_client


def split(uri):
    u = urlparse(uri)
    if u.scheme != "s3" or not u.netloc or not u.path.strip("/"):
        sys.exit("want an s3://bucket/key URI, got %r" % uri)
    return u.netloc, u.path.lstrip("/")


def read_record(s3, uri):
    bucket, key = split(uri)
    try:
        return json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    except Exception as e:  # noqa: BLE001 - a missing record is no model yet
        if _is_not_found(e):
            return None
        raise


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    s3 = s3_client()
    cmd = argv[1]
    if cmd == "prepare":
        bucket, key = split(argv[2])
        rows = ["x,y"] + ["%.4f,%d" % (random.random(), random.randint(0, 1)) for _ in range(100)]
        s3.put_object(Bucket=bucket, Key=key, Body=("\n".join(rows) + "\n").encode())
        print("wrote %d rows to %s" % (len(rows) - 1, argv[2]))
        print("dlc:metric rows=%d" % (len(rows) - 1))
    elif cmd == "current":
        rec = read_record(s3, argv[2])
        acc = float(rec["accuracy"]) if rec else 0.0
        print("production model: %s" % (json.dumps(rec) if rec else "none yet"))
        print("dlc:metric production_accuracy=%g" % acc)
    elif cmd == "promote":
        uri, acc, ckpt, run = argv[2], float(argv[3]), argv[4], argv[5]
        rec = read_record(s3, uri)
        if rec and float(rec["accuracy"]) >= acc:
            print("not promoted: production holds %s (accuracy %g >= %g)" % (rec.get("run"), float(rec["accuracy"]), acc))
            return
        bucket, key = split(uri)
        new = {"accuracy": acc, "checkpoint": ckpt, "run": run,
               "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(new).encode(), ContentType="application/json")
        print("promoted %s: %s" % (run, json.dumps(new)))
    else:
        sys.exit("unknown command %r\n%s" % (cmd, __doc__))


if __name__ == "__main__":
    main(sys.argv)
