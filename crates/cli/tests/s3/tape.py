#!/usr/bin/env python3
"""Stores GLACIER objects, or restores them and reads them back, for the tests
of the S3 front end's tape side. Each object's body is drawn from its bucket,
key and size alone, so the second run knows what the first stored.

Usage:
  tape.py ENDPOINT ACCESS_KEY SECRET put BUCKET/KEY:SIZE ...
  tape.py ENDPOINT ACCESS_KEY SECRET restore TIER TIMEOUT BUCKET/KEY:SIZE ...

`put` stores each object as GLACIER. `restore` asks a restore of each (Days
1, tier TIER) at once, waits up to TIMEOUT seconds for every restore to end
and reads each object back. It prints one JSON document: {"checks": N,
"failed": [...]} and exits 1 when a check failed.
"""

import hashlib
import json
import random
import sys
import time

import boto3
from botocore.config import Config

endpoint, ak, sk, mode = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak,
                  aws_secret_access_key=sk, region_name="us-east-1",
                  config=Config(s3={"addressing_style": "path"}))
checks, failed = 0, []


def check(what, ok, detail=""):
    global checks
    checks += 1
    if not ok:
        failed.append(f"{what}: {str(detail)[-600:]}")


def parse(arg):
    where, size = arg.rsplit(":", 1)
    bucket, key = where.split("/", 1)
    return bucket, key, int(size)


def body(bucket, key, size):
    return random.Random(f"{bucket}/{key}/{size}").randbytes(size)


if mode == "put":
    for bucket, key, size in map(parse, sys.argv[5:]):
        s3.put_object(Bucket=bucket, Key=key, Body=body(bucket, key, size),
                      StorageClass="GLACIER")
        checks += 1
elif mode == "restore":
    tier, timeout = sys.argv[5], float(sys.argv[6])
    objects = list(map(parse, sys.argv[7:]))
    for bucket, key, _ in objects:
        r = s3.restore_object(Bucket=bucket, Key=key, RestoreRequest={
            "Days": 1, "GlacierJobParameters": {"Tier": tier}})
        status = r["ResponseMetadata"]["HTTPStatusCode"]
        check(f"restore of {bucket}/{key} starts", status == 202, status)
    waiting = {(b, k) for b, k, _ in objects}
    until = time.monotonic() + timeout
    while waiting and time.monotonic() < until:
        waiting = {(b, k) for b, k in waiting
                   if 'ongoing-request="false"' not in
                   (s3.head_object(Bucket=b, Key=k).get("Restore") or "")}
        if waiting:
            time.sleep(0.25)
    check("every restore ended", not waiting, sorted(waiting))
    for bucket, key, size in objects:
        if (bucket, key) in waiting:
            continue
        got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        want = body(bucket, key, size)
        check(f"{bucket}/{key} reads back identical",
              hashlib.sha256(got).digest() == hashlib.sha256(want).digest(),
              f"{len(got)} bytes of {size}")
else:
    sys.exit(f"no mode {mode}: put or restore")

print(json.dumps({"checks": checks, "failed": failed}))
sys.exit(1 if failed else 0)
