#!/usr/bin/env python3
"""Many small objects through the S3 front end, as one JSON document on stdout
(progress on stderr); it exits 1 when a check failed.

A home with a virtual library of one drive (the LTO-9 model scaled to
--capacity cartridges, the virtual clock), an access key and a bucket `small`
archived in batches of --batch-age seconds is served over HTTPS. --clients
boto3 clients (one thread each, one connection each) PUT --objects objects of
--size bytes of random data with storage class GLACIER, all at once. The
document gives:

  put          the PUTs' wall time and objects per second, and the server's
               CPU seconds (user and system, from /proc/PID/stat before the
               first PUT and after the last) in all and per object;
  archive      the time from the last PUT until every object is on tape, the
               server's CPU seconds for it, and the jobs the objects landed
               in: per job (`tapeloom jobs --json`, `tapeloom ls JOB --json`)
               its files, streams, cartridges and the blocks its files span.

Checks: every PUT was answered 200; the listing holds every object, GLACIER;
every object is a file of a job `s3-small` that ended ok, and there are at most
--max-jobs such jobs (a handful, not a tape file per object); a sample of
--sample objects restored (Expedited) reads back identical.

Run it with the Python of the test command's virtual environment, which has
boto3, against a binary built with `cargo build --release -p tapeloom
--features tapeloom/test-hooks`:

  target/s3-venv/bin/python bench/s3_small.py                 # 10,000 objects
  target/s3-venv/bin/python bench/s3_small.py --quick         # 1,000 objects
"""
import argparse, json, os, random, shutil, sqlite3, sys, threading, time

# bench/copy.py would stand for the standard library's copy, which botocore
# imports: this folder is searched last.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != HERE] + [HERE]
import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402

from engine import default_work_parent, log, parse_size, REPO  # noqa: E402
from s3_glacier import Checks, Pass, RESTORED, new_home, tl  # noqa: E402

BUCKET = "small"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """The user and system CPU seconds of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        # The fields after the command's name, which may hold spaces.
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICK


def client(p, connections):
    return boto3.client("s3", endpoint_url=p.url, aws_access_key_id=p.ak,
                        aws_secret_access_key=p.sk, region_name="us-east-1",
                        verify=p.ca or True,
                        config=Config(s3={"addressing_style": "path"},
                                      max_pool_connections=connections,
                                      retries={"total_max_attempts": 1}))


def put_all(p, keys, data, clients):
    """PUTs every key from `clients` threads: the errors, as (key, text)."""
    errors, lock, it = [], threading.Lock(), iter(keys)

    def work():
        s3 = client(p, 1)
        while True:
            with lock:
                k = next(it, None)
            if k is None:
                return
            try:
                r = s3.put_object(Bucket=BUCKET, Key=k, Body=data[k], StorageClass="GLACIER")
                if r["ResponseMetadata"]["HTTPStatusCode"] != 200:
                    raise RuntimeError(r["ResponseMetadata"]["HTTPStatusCode"])
            except Exception as e:  # noqa: BLE001 (every failed PUT is counted)
                with lock:
                    errors.append((k, f"{type(e).__name__}: {e}"))

    threads = [threading.Thread(target=work) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def bucket_jobs(a, home):
    return [j for j in tl(a, home, "jobs").get("jobs", []) if j.get("name") == f"s3-{BUCKET}"]


def wait_archived(a, home, n, timeout):
    """Waits until the bucket's jobs that ended ok hold `n` files: the jobs."""
    until = time.monotonic() + timeout
    while True:
        jobs = bucket_jobs(a, home)
        if sum(j.get("files", 0) for j in jobs if j.get("status") == "ok") >= n:
            return jobs
        if time.monotonic() > until:
            return jobs
        time.sleep(2)


def job_layout(a, home, job):
    """Where a job's files are: `tapeloom ls JOB --json` gives each file's
    cartridge and first block, the home's SQLite catalog its streams."""
    doc = tl(a, home, "ls", job["job_id"])
    files = [e for e in doc.get("entries", []) if e.get("type") == "file"]
    blocks = [e["block"] for e in files]
    db = sqlite3.connect(f"file:{os.path.join(home, 'catalog.sqlite')}?mode=ro", uri=True)
    try:
        streams = db.execute("SELECT COUNT(*) FROM streams WHERE job_id = ?",
                             (job["job_id"],)).fetchone()[0]
    finally:
        db.close()
    return {"job": job["job_id"], "status": job.get("status"), "files": len(files),
            "streams": streams, "volumes": sorted({e["volume"] for e in files}),
            "first_block": min(blocks) if blocks else None,
            "last_block": max(blocks) if blocks else None}


def restore_sample(p, keys, data, timeout):
    """Restores `keys` (Expedited) and reads them: the keys read back identical."""
    s3 = p.boto()
    for k in keys:
        s3.restore_object(Bucket=BUCKET, Key=k,
                          RestoreRequest={"Days": 1, "GlacierJobParameters": {"Tier": "Expedited"}})
    until, left = time.monotonic() + timeout, set(keys)
    while left and time.monotonic() < until:
        left = {k for k in left if not RESTORED.match(p.head_restore(BUCKET, k) or "")}
        time.sleep(1)
    return [k for k in keys if k not in left
            and s3.get_object(Bucket=BUCKET, Key=k)["Body"].read() == data[k]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default=None, help="a folder for the home (emptied first)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--quick", action="store_true", help="1,000 objects unless --objects says")
    ap.add_argument("--objects", type=int, default=None, help="(default 10,000)")
    ap.add_argument("--size", type=parse_size, default=4096, help="bytes per object (default 4K)")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--batch-age", type=int, default=30, help="seconds (default 30)")
    ap.add_argument("--max-jobs", type=int, default=5,
                    help="the most jobs the objects may land in (default 5)")
    ap.add_argument("--sample", type=int, default=20, help="objects restored and read back")
    ap.add_argument("--capacity", type=parse_size, default=parse_size("8G"),
                    help="bytes per cartridge; the LTO-9 model is scaled to it (default 8G)")
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=900, help="seconds archiving may take")
    ap.add_argument("--plain", action="store_true", help="serve plain HTTP instead of HTTPS")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.objects is None:
        a.objects = 1000 if a.quick else 10_000
    # What the server needs of the options: restores are Expedited here.
    a.archive, a.standard_window, a.bulk_window = True, 10, 10
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"{a.bin} is not an executable (cargo build --release -p tapeloom "
                 f"--features tapeloom/test-hooks)")
    a.work = a.work or os.path.join(default_work_parent(), "tapeloom-s3-small")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    home = os.path.join(a.work, "home")
    key, scale = new_home(a, home, [BUCKET], ["--batch-age", str(a.batch_age)])
    c = Checks()
    p = Pass(a, c, "plain" if a.plain else "tls", key, home, a.work)
    rng = random.Random(a.seed)
    keys = [f"o/{i // 1000:03}/{i:06}" for i in range(a.objects)]
    data = {k: rng.randbytes(a.size) for k in keys}
    doc = {"bench": "s3_small", "quick": a.quick, "objects": a.objects, "size": a.size,
           "clients": a.clients, "transport": p.t, "batch_age": a.batch_age, "scale": scale}
    p.start()
    pid = p.server.p.pid
    try:
        log(f"{a.objects} PUTs of {a.size} bytes from {a.clients} clients")
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        errors = put_all(p, keys, data, a.clients)
        t1, cpu1 = time.monotonic(), cpu_seconds(pid)
        put_s = t1 - t0
        doc["put"] = {"seconds": round(put_s, 2), "objects_per_second": round(a.objects / put_s, 1),
                      "server_cpu_seconds": round(cpu1 - cpu0, 2),
                      "server_cpu_ms_per_object": round((cpu1 - cpu0) * 1000 / a.objects, 3),
                      "errors": len(errors), "first_errors": errors[:3]}
        p.check("every PUT was answered 200", not errors, errors[:3])
        listed = p.objects(BUCKET)
        p.check("the listing holds every object, GLACIER",
                len(listed) == a.objects and all(o.get("StorageClass") == "GLACIER"
                                                 for o in listed.values()), len(listed))
        log("waiting for the archive")
        jobs = wait_archived(a, home, a.objects, a.timeout)
        t2, cpu2 = time.monotonic(), cpu_seconds(pid)
        ok = [j for j in jobs if j.get("status") == "ok"]
        layouts = [job_layout(a, home, j) for j in ok]
        files = sum(x["files"] for x in layouts)
        doc["archive"] = {"seconds_after_last_put": round(t2 - t1, 1),
                          "server_cpu_seconds": round(cpu2 - cpu1, 2), "jobs": len(jobs),
                          "jobs_ok": len(ok), "files": files,
                          "streams": sum(x["streams"] for x in layouts), "layout": layouts}
        p.check("every object is a file of a job s3-small that ended ok", files == a.objects,
                (files, a.objects, [(j["job_id"], j.get("status")) for j in jobs]))
        p.check(f"the objects landed in at most {a.max_jobs} jobs",
                0 < len(jobs) <= a.max_jobs, len(jobs))
        sample = rng.sample(keys, min(a.sample, len(keys)))
        t3 = time.monotonic()
        same = restore_sample(p, sample, data, a.timeout)
        doc["sample"] = {"objects": len(sample), "identical": len(same),
                         "seconds": round(time.monotonic() - t3, 1)}
        p.check("a sample restored (Expedited) reads back identical", len(same) == len(sample),
                (len(same), len(sample)))
    except Exception as e:  # noqa: BLE001 (a crash is a failed check, and the document is printed)
        c.check("the run went to its end", False, f"{type(e).__name__}: {e}")
    finally:
        p.server.stop()
    doc.update(checks=c.count, failed=c.failed, **{"pass": not c.failed})
    if not a.keep and not c.failed:
        shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(doc, indent=2))
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
