"""A replica that tries to reach another workspace's checkpoints with the S3
credentials its backend gave it (TestStorageIsolation).

usage: s3_intruder.py OUT BUCKET OWN_PREFIX OTHER_PREFIX KEY...

It writes one object under its own prefix, then tries every way into OTHER_PREFIX (read,
list, copy out, overwrite, delete one by one and in a batch) and the unprefixed bucket
listing, and writes {"access": <its key id>, "results": {op: "OK" | error code}} to OUT.
"""

import json
import os
import sys

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError


def attempt(results, op, fn):
    try:
        out = fn()
    except ClientError as e:
        results[op] = e.response.get("Error", {}).get("Code", "Error")
        return
    if op == "delete-batch":
        errors = out.get("Errors", [])
        codes = sorted({e.get("Code", "") for e in errors})
        results[op] = "OK" if out.get("Deleted") else ",".join(codes) or "OK"
        return
    results[op] = "OK"


def main():
    out, bucket, own, other, keys = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    s3 = boto3.client(
        "s3",
        endpoint_url=os.environ["DLC_S3_ENDPOINT"],
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    r = {}
    attempt(r, "put-own", lambda: s3.put_object(Bucket=bucket, Key=own + "intruder/mine", Body=b"mine"))
    attempt(r, "list-own", lambda: s3.list_objects_v2(Bucket=bucket, Prefix=own))
    attempt(r, "get-other", lambda: s3.get_object(Bucket=bucket, Key=other + keys[0])["Body"].read())
    attempt(r, "list-other", lambda: s3.list_objects_v2(Bucket=bucket, Prefix=other))
    attempt(r, "list-bucket", lambda: s3.list_objects_v2(Bucket=bucket))
    attempt(r, "copy-out", lambda: s3.copy_object(Bucket=bucket, Key=own + "intruder/stolen",
                                                 CopySource={"Bucket": bucket, "Key": other + keys[0]}))
    attempt(r, "overwrite-other", lambda: s3.put_object(Bucket=bucket, Key=other + keys[0], Body=b"x"))
    attempt(r, "delete-other", lambda: s3.delete_object(Bucket=bucket, Key=other + keys[0]))
    attempt(r, "delete-batch", lambda: s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": other + k} for k in keys]}))
    attempt(r, "dotdot", lambda: s3.get_object(Bucket=bucket, Key=own + "../" + other.rstrip("/").split("/")[-1] + "/" + keys[0]))
    with open(out, "w") as f:
        json.dump({"access": os.environ.get("AWS_ACCESS_KEY_ID", ""), "results": r}, f)


if __name__ == "__main__":
    main()
