#!/usr/bin/env python3
"""Restores in tape order: a burst of S3 RestoreObject calls is read as the
recall planner orders it, each cartridge mounted once. One JSON document on
stdout (progress on stderr); it exits 1 when a check failed.

A home with a virtual library of one drive, the LTO-9 model at --scale (0.0001:
a cartridge of 1.8 GB whose reads and locates take what a whole LTO-9
cartridge's take) and the virtual clock, gets --objects GLACIER objects of
--size each (1,000 of 1 MiB by default) through the S3 front end. The
cartridges are made to hold a quarter of them and a tenth more (--capacity),
so that the objects lie over four cartridges, at their start, as a library's
newest objects lie over the cartridges it fills; the bucket archives them in
batches of --batch-objects, each read back, and their disk copies are
released. The home is
then copied three times, and on each copy a server reads the same burst of
RestoreObject calls (tier Bulk, Days 1, the keys in a shuffled order: the order
they came) in one of the three orders of `--s3-restore-order`:

  planned  one reading, each cartridge mounted once and its objects read in the
           order the drive's model says is fastest (the server's default);
  block    one reading, each cartridge's objects in block order: the sum of the
           cartridges' sequential reads of those objects;
  asked    one object after another in the order they came, each read alone.

Each server logs one line per reading ("S3 restores: one reading") with the
modeled seconds it took on the drive's model, the seconds its plan predicted,
the loads and the cartridges read out of block order; the figures come from
that line. Checks: every restore ends and every object then reads back
identical (by SHA-256, in the planned pass); the planned reading loads each
cartridge once; it takes at most 1.1 times the block-order reading and at most
a third of the one-by-one reading.

  target/s3-venv/bin/python bench/s3_order.py
  target/s3-venv/bin/python bench/s3_order.py --quick
"""
import argparse, concurrent.futures, hashlib, json, os, random, re, shutil, subprocess
import sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != HERE] + [HERE]
import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

from engine import default_work_parent, log, parse_size, REPO  # noqa: E402
from s3_glacier import Checks, tl  # noqa: E402

READING = re.compile(r"S3 restores: one reading .*")
FIELD = re.compile(r"(\w+)=(-?[\d.]+|\w+)")


def start(a, home, log_path, order):
    """A server of `home` reading restores in `order`: its process and S3 URL."""
    args = [a.bin, "--home", home, "server", "--listen", "127.0.0.1:0", "--s3-listen",
            "127.0.0.1:0", "--s3-plain", "--s3-bulk-window", str(a.bulk_window),
            "--s3-restore-order", order]
    err = open(log_path, "a")
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True,
                         env=dict(os.environ, RUST_LOG="info"))
    lines = [p.stdout.readline().strip() for _ in range(3)]
    if not lines[2].startswith("S3 on "):
        p.kill()
        raise RuntimeError(f"the server did not start ({lines}): see {log_path}")
    return p, lines[2].removeprefix("S3 on ")


def stop(p):
    p.terminate()
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def client(url, key):
    return boto3.client("s3", endpoint_url=url, aws_access_key_id=key["access_key"],
                        aws_secret_access_key=key["secret"], region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      max_pool_connections=16))


def log_sums(path, what):
    """The sum of `objects=` over the server log's lines that say `what`."""
    n = 0
    with open(path) as f:
        for line in f:
            if what in line:
                m = re.search(r"objects=(\d+)", line)
                n += int(m.group(1)) if m else 0
    return n


def readings(path):
    """The fields of each "one reading" line of the server's log."""
    out = []
    with open(path) as f:
        for line in f:
            m = READING.search(line)
            if m:
                out.append({k: (float(v) if re.fullmatch(r"-?[\d.]+", v) else v)
                            for k, v in FIELD.findall(m.group(0))})
    return out


def wait_for(what, cond, timeout):
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"{what}: not after {timeout} s")
        time.sleep(0.5)
    return round(time.monotonic() - t0, 1)


def fill(a, work, c):
    """The home with the objects archived and released: its path, key, digests, volumes."""
    home = os.path.join(work, "home")
    scale = a.scale
    subprocess.run([a.bin, "--home", home, "library", "create", "--drives", "1", "--slots",
                    "12", "--capacity", str(a.capacity), "--model", "lto9", "--clock",
                    "virtual", "--scale", repr(scale)], check=True, capture_output=True)
    tl(a, home, "pool", "create", "s3")
    key = tl(a, home, "s3", "key", "add", "order")
    tl(a, home, "s3", "bucket", "create", "order", "--pool", "s3", "--batch-age", "2",
       "--batch-objects", str(a.batch_objects))
    log_path = os.path.join(work, "fill.log")
    p, url = start(a, home, log_path, "planned")
    rng = random.Random(a.seed)
    digests = {}
    keys = [f"obj/{i:05}" for i in range(a.objects)]
    bodies = {k: rng.randbytes(a.size) for k in keys}
    digests = {k: hashlib.sha256(b).hexdigest() for k, b in bodies.items()}
    t0 = time.monotonic()
    try:
        s3 = client(url, key)
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda k: s3.put_object(Bucket="order", Key=k, Body=bodies[k],
                                                StorageClass="GLACIER"), keys))
        put_s = round(time.monotonic() - t0, 1)
        log(f"{a.objects} objects stored in {put_s} s; waiting for tape")
        wait_s = wait_for("every object archived and its disk copy released",
                          lambda: log_sums(log_path, "S3 disk copies released") >= a.objects,
                          a.timeout)
    finally:
        stop(p)
    jobs = [j for j in tl(a, home, "jobs")["jobs"] if j["name"] == "s3-order"]
    volumes = sorted({v for j in jobs for v in j["volumes"]})
    c.check("the batches' jobs ended ok", jobs and all(j["status"] == "ok" for j in jobs),
            [(j["job_id"], j["status"]) for j in jobs])
    c.check("every object is in a job", sum(j["files"] for j in jobs) - len(jobs) == a.objects,
            [j["files"] for j in jobs])
    return home, key, digests, volumes, {"put_seconds": put_s, "archive_seconds": wait_s,
                                         "jobs": len(jobs), "cartridges": volumes}


def burst(a, c, work, src, key, digests, order):
    """One order's pass on a copy of the home: its reading's figures."""
    home = os.path.join(work, f"home-{order}")
    shutil.copytree(src, home, symlinks=True)
    log_path = os.path.join(work, f"{order}.log")
    p, url = start(a, home, log_path, order)
    try:
        s3 = client(url, key)
        keys = sorted(digests)
        random.Random(a.seed + 1).shuffle(keys)

        def ask(k):
            r = s3.restore_object(Bucket="order", Key=k, RestoreRequest={
                "Days": 1, "GlacierJobParameters": {"Tier": "Bulk"}})
            return r["ResponseMetadata"]["HTTPStatusCode"]

        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            codes = list(ex.map(ask, keys))
        ask_s = round(time.monotonic() - t0, 1)
        c.check(f"{order}: every RestoreObject answered 202", set(codes) == {202},
                sorted(set(codes)))
        wait_s = wait_for(f"{order}: every restore read",
                          lambda: log_sums(log_path, "S3 restores read ") >= len(keys), a.timeout)
        got = readings(log_path)
        sample = keys if order == "planned" else keys[:50]

        def same(k):
            body = s3.get_object(Bucket="order", Key=k)["Body"].read()
            return hashlib.sha256(body).hexdigest() == digests[k]

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            identical = sum(ex.map(same, sample))
        c.check(f"{order}: restored objects read back identical", identical == len(sample),
                f"{identical} of {len(sample)}")
    finally:
        stop(p)
        shutil.rmtree(home, ignore_errors=True)
    total = lambda f: round(sum(max(r.get(f, 0), 0) for r in got), 1)  # noqa: E731
    return {"readings": len(got), "loads": int(total("loads")), "mounts": int(total("mounts")),
            "reordered": int(total("reordered")), "modeled_seconds": total("modeled_seconds"),
            "planned_seconds": total("planned_seconds"), "ask_seconds": ask_s,
            "wall_seconds": wait_s}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--quick", action="store_true", help="200 objects")
    ap.add_argument("--objects", type=int, default=None, help="(default 1000)")
    ap.add_argument("--size", type=parse_size, default=None, help="(default 1M)")
    ap.add_argument("--capacity", type=parse_size, default=None,
                    help="bytes per cartridge (default: a quarter of the objects' bytes and a bit)")
    ap.add_argument("--scale", type=float, default=1e-4,
                    help="the LTO-9 model's scale (default 0.0001: cartridges of 1.8 GB, which "
                         "the objects fill in part)")
    ap.add_argument("--batch-objects", type=int, default=None,
                    help="objects per batch (default: a quarter of them)")
    ap.add_argument("--bulk-window", type=int, default=20,
                    help="seconds Bulk restores gather (default 20: the whole burst)")
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    a.objects = a.objects or (200 if a.quick else 1000)
    a.size = a.size or (1 << 20)
    a.batch_objects = a.batch_objects or a.objects // 4
    a.capacity = a.capacity or int(a.objects * a.size / 4 * 1.1)
    work = a.work or os.path.join(default_work_parent(), "tapeloom-s3-order")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    c = Checks()
    home, key, digests, volumes, filled = fill(a, work, c)
    log(f"archived on {volumes}")
    doc = {"bench": "s3_order", "objects": a.objects, "size": a.size, "capacity": a.capacity,
           **filled}
    for order in ("planned", "block", "asked"):
        log(f"restores read {order}")
        doc[order] = burst(a, c, work, home, key, digests, order)
        log(f"{order}: {doc[order]}")
    p, b, o = doc["planned"], doc["block"], doc["asked"]
    c.check("planned: one reading", p["readings"] == 1, p["readings"])
    c.check("planned: each cartridge loaded once", p["loads"] == len(volumes),
            (p["loads"], volumes))
    c.check("planned: each cartridge read in ascending position", p["reordered"] == 0,
            p["reordered"])
    doc["planned_over_block"] = round(p["modeled_seconds"] / b["modeled_seconds"], 3) \
        if b["modeled_seconds"] > 0 else None
    doc["planned_over_asked"] = round(p["modeled_seconds"] / o["modeled_seconds"], 3) \
        if o["modeled_seconds"] > 0 else None
    c.check("planned: at most 1.1 times the cartridges' sequential reads",
            doc["planned_over_block"] is not None and doc["planned_over_block"] <= 1.1,
            doc["planned_over_block"])
    c.check("planned: at most a third of the requests served one at a time",
            doc["planned_over_asked"] is not None and doc["planned_over_asked"] <= 1 / 3,
            doc["planned_over_asked"])
    doc.update(checks=c.count, failed=c.failed, **{"pass": not c.failed})
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(doc, indent=2))
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
