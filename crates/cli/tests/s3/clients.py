#!/usr/bin/env python3
"""Stores and reads back a bucket with the S3 clients people run besides the
SDKs: restic (minio-go: signed STREAMING-AWS4-HMAC-SHA256-PAYLOAD chunks over
plain HTTP), s3cmd and rclone. Each works on a STANDARD bucket of its own.

Usage: clients.py ENDPOINT ACCESS_KEY SECRET WORK_DIR RCLONE. The buckets
`restic`, `s3cmd` and `rclone` must exist. It prints one JSON document:
{"checks": N, "failed": [...]} and exits 1 when a check failed.
"""

import filecmp
import json
import os
import shutil
import subprocess
import sys

endpoint, ak, sk, work, rclone = sys.argv[1:6]
host = endpoint.split("://", 1)[1]
checks, failed = 0, []


def check(what, ok, detail=""):
    global checks
    checks += 1
    if not ok:
        failed.append(f"{what}: {str(detail)[-600:]}")


def run(args, env=None):
    r = subprocess.run(args, env=dict(os.environ, **(env or {})), capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def same_tree(a, b):
    """Whether the trees a and b hold the same files with the same bytes."""
    c = filecmp.dircmp(a, b)
    if c.left_only or c.right_only or c.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, c.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(os.path.join(a, d), os.path.join(b, d)) for d in c.common_dirs)


# A tree of small files and one of 12 MiB (a multipart upload for each client).
src = os.path.join(work, "src")
for i in range(120):
    d = os.path.join(src, f"d{i % 5}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}"), "wb") as f:
        f.write(os.urandom(i * 37))
with open(os.path.join(src, "big"), "wb") as f:
    f.write(os.urandom(12 << 20))

# restic: init, backup, check --read-data, restore.
renv = {"AWS_ACCESS_KEY_ID": ak, "AWS_SECRET_ACCESS_KEY": sk, "RESTIC_PASSWORD": "tapeloom",
        "RESTIC_CACHE_DIR": os.path.join(work, "restic-cache")}
repo = ["restic", "-r", f"s3:{endpoint}/restic"]
rc, out = run(repo + ["init"], renv)
check("restic init", rc == 0, out)
rc, out = run(repo + ["backup", src], renv)
check("restic backup", rc == 0, out)
rc, out = run(repo + ["check", "--read-data"], renv)
check("restic check --read-data", rc == 0 and "no errors were found" in out, out)
back = os.path.join(work, "restic-back")
rc, out = run(repo + ["restore", "latest", "--target", back], renv)
check("restic restore identical", rc == 0 and same_tree(src, os.path.join(back, src.lstrip("/"))), out)

# s3cmd: put --recursive, ls, get --recursive.
cfg = os.path.join(work, "s3cfg")
with open(cfg, "w") as f:
    f.write(f"[default]\naccess_key = {ak}\nsecret_key = {sk}\nhost_base = {host}\nhost_bucket = {host}\n"
            f"use_https = {'True' if endpoint.startswith('https') else 'False'}\nsignature_v2 = False\n")
s3cmd = ["s3cmd", "-c", cfg]
rc, out = run(s3cmd + ["put", "--recursive", src + "/", "s3://s3cmd/tree/"])
check("s3cmd put --recursive", rc == 0, out)
rc, out = run(s3cmd + ["ls", "--recursive", "s3://s3cmd/tree/"])
check("s3cmd ls --recursive", rc == 0 and len(out.strip().splitlines()) == 121, out)
back = os.path.join(work, "s3cmd-back")
os.makedirs(back)
rc, out = run(s3cmd + ["get", "--recursive", "s3://s3cmd/tree/", back + "/"])
check("s3cmd get --recursive identical", rc == 0 and same_tree(src, back), out)

# rclone: copy, check, a second sync that moves nothing.
cenv = {"RCLONE_CONFIG_T_TYPE": "s3", "RCLONE_CONFIG_T_PROVIDER": "Other",
        "RCLONE_CONFIG_T_ACCESS_KEY_ID": ak, "RCLONE_CONFIG_T_SECRET_ACCESS_KEY": sk,
        "RCLONE_CONFIG_T_ENDPOINT": endpoint, "RCLONE_CONFIG_T_FORCE_PATH_STYLE": "true",
        "RCLONE_CONFIG": os.path.join(work, "rclone.conf")}
rc, out = run([rclone, "copy", src, "t:rclone/tree"], cenv)
check("rclone copy", rc == 0, out)
rc, out = run([rclone, "check", src, "t:rclone/tree"], cenv)
check("rclone check finds 0 differences", rc == 0 and "0 differences found" in out, out)
rc, out = run([rclone, "sync", "-v", src, "t:rclone/tree"], cenv)
check("a second rclone sync transfers nothing", rc == 0 and "There was nothing to transfer" in out, out)
back = os.path.join(work, "rclone-back")
rc, out = run([rclone, "copy", "t:rclone/tree", back], cenv)
check("rclone copy back identical", rc == 0 and same_tree(src, back), out)

shutil.rmtree(src)
print(json.dumps({"checks": checks, "failed": failed}, indent=1))
sys.exit(1 if failed else 0)
