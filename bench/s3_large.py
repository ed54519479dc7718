#!/usr/bin/env python3
"""One large object through the S3 front end, from upload to tape and back, as
one JSON document on stdout (progress on stderr); it exits 1 when a check
failed.

A home with a virtual library of one drive (the LTO-9 model scaled to
--capacity cartridges, the virtual clock), an access key and a bucket `large`
archived in batches of --batch-age seconds is served over HTTPS. Then:

  upload    aws-cli v1 (awscli from PyPI, run by this Python, with its stock
            multipart settings) copies --size bytes of random data from its
            standard input (`aws s3 cp - s3://large/big --storage-class GLACIER
            --expected-size N`), so that no source file is kept; the bytes'
            SHA-256 is taken as they are sent. HEAD must give the size, the class
            and a multipart entity tag (`-N`).
  archive   the object's job `s3-large` ends ok, and the catalog then says its
            disk copy was given back (the job was read back), so that the
            restore reads tape; `tapeloom ls JOB --json` shows it is the job's
            one file, on one cartridge, and its start (block and offset); the
            catalog's extents of the job (read from the home's SQLite file)
            show its blocks, from that start to its end, as one run that no
            other stream's block breaks.
  restore   RestoreObject (Expedited, one day) and HEAD until the restore ended.
  get       one GetObject, read whole and hashed: its time and rate, and that
            rate against the model's native read rate (`tapeloom drive models`,
            the rate a full-scale LTO-9 reads at) as a ratio; the SHA-256 must
            be the upload's.

Throughout, the server's resident memory (VmRSS of /proc/PID/status) is read
every 0.2 s; its peak over the run, and per step, must stay under --rss-limit
(256 MiB). The home needs about three times --size of free disk: the S3 stage's
copy (given back once the job is read back), the virtual cartridge, and the
restore cache's copy.

Run it with the Python of the test command's virtual environment, which has
aws-cli v1 and boto3, against a binary built with `cargo build --release -p
tapeloom --features tapeloom/test-hooks`:

  target/s3-venv/bin/python bench/s3_large.py                 # 5 GiB
  target/s3-venv/bin/python bench/s3_large.py --quick         # 512 MiB
"""
import argparse, hashlib, json, os, random, shutil, sqlite3, subprocess, sys, threading, time

# bench/copy.py would stand for the standard library's copy, which botocore
# imports: this folder is searched last.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != HERE] + [HERE]

from engine import default_work_parent, log, parse_size, REPO  # noqa: E402
from s3_glacier import Checks, Pass, RESTORED, new_home, tl  # noqa: E402
from s3_kill import released  # noqa: E402

BUCKET, KEY = "large", "big"
MIB = 1 << 20


class RssSampler:
    """Reads a process's VmRSS every `every` seconds in a thread: the peak so
    far, and the peak of each step named with `step`."""

    def __init__(self, pid, every=0.2):
        self.pid, self.every, self.peak, self.samples = pid, every, 0, 0
        self.steps, self.current = {}, "start"
        self.stop_ = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def rss(self):
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def run(self):
        while not self.stop_.is_set():
            r = self.rss()
            if r is not None:
                self.samples += 1
                self.peak = max(self.peak, r)
                self.steps[self.current] = max(self.steps.get(self.current, 0), r)
            self.stop_.wait(self.every)

    def step(self, name):
        self.current = name

    def stop(self):
        self.stop_.set()
        self.t.join()


def upload(p, size, seed):
    """aws-cli v1 copies `size` random bytes from its standard input: (exit
    code, stderr, seconds, the bytes' SHA-256)."""
    env = p.aws_env()
    cmd = [sys.executable, "-m", "awscli", "--endpoint-url", p.url, "s3", "cp", "--only-show-errors",
           "--storage-class", "GLACIER", "--expected-size", str(size), "-", f"s3://{BUCKET}/{KEY}"]
    rng = random.Random(seed)
    h = hashlib.sha256()
    err_path = os.path.join(p.work, "aws-cp.err")
    t0 = time.monotonic()
    with open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err,
                                env=env)
        left = size
        try:
            while left > 0:
                piece = rng.randbytes(min(left, 8 * MIB))
                h.update(piece)
                proc.stdin.write(piece)
                left -= len(piece)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        rc = proc.wait()
    with open(err_path) as f:
        return rc, f.read(), time.monotonic() - t0, h.hexdigest()


def wait_job(a, home, timeout):
    """The bucket's first job that ended, once one has (None at the timeout)."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        jobs = [j for j in tl(a, home, "jobs").get("jobs", []) if j.get("name") == f"s3-{BUCKET}"]
        done = [j for j in jobs if j.get("status") not in ("running", None)]
        if done:
            return done[0]
        time.sleep(2)
    return None


def run_of_blocks(home, job, size):
    """The object's file in the catalog and the extents of its job: whether
    its blocks are one run on one cartridge that no other stream breaks."""
    db = sqlite3.connect(f"file:{os.path.join(home, 'catalog.sqlite')}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT stream, start_seq, start_lbn, start_off, end_seq, end_lbn "
                          "FROM files WHERE job_id = ? AND size = ?", (job, size)).fetchall()
        extents = db.execute("SELECT stream, seq, first_lbn, blocks FROM extents "
                             "WHERE job_id = ? ORDER BY seq, first_lbn", (job,)).fetchall()
    finally:
        db.close()
    if len(rows) != 1:
        return {"rows": len(rows), "one_run": False}
    stream, sseq, first, off, eseq, last = rows[0]
    mine = [e for e in extents if e[0] == stream and e[1] == sseq
            and e[2] <= last and e[2] + e[3] > first]
    others = [e for e in extents if e[0] != stream and e[1] == sseq
              and e[2] <= last and e[2] + e[3] > first]
    follow = all(b[2] == a_[2] + a_[3] for a_, b in zip(mine, mine[1:]))
    covered = bool(mine) and mine[0][2] <= first and mine[-1][2] + mine[-1][3] > last
    return {"stream": stream, "cartridge_seq": [sseq, eseq], "first_block": first,
            "first_offset": off, "last_block": last, "blocks": last - first + 1,
            "extents": len(mine), "other_streams_inside": len(others),
            "one_run": sseq == eseq and follow and covered and not others}


def model_rate(a):
    """The LTO-9 model's native rate in MB/s, as `tapeloom drive models` gives it."""
    doc = json.loads(subprocess.run([a.bin, "--json", "drive", "models"], check=True,
                                    capture_output=True, text=True).stdout)
    return next(m["native_mb_per_s"] for m in doc["models"] if m["name"] == "lto9")


def get_timed(p):
    """One GetObject read whole: (seconds, bytes, SHA-256)."""
    h, n = hashlib.sha256(), 0
    t0 = time.monotonic()
    body = p.boto().get_object(Bucket=BUCKET, Key=KEY)["Body"]
    for chunk in iter(lambda: body.read(8 * MIB), b""):
        h.update(chunk)
        n += len(chunk)
    return time.monotonic() - t0, n, h.hexdigest()


def steps(a, p, c, doc, rss):
    home = p.home
    rss.step("upload")
    log(f"aws s3 cp of {a.size} bytes from stdin, GLACIER")
    rc, err, secs, sha = upload(p, a.size, a.seed)
    doc["upload"] = {"seconds": round(secs, 1), "mb_per_s": round(a.size / secs / 1e6, 1)}
    if not c.check("aws s3 cp - --storage-class GLACIER", rc == 0, err[-400:]):
        return
    head = p.boto().head_object(Bucket=BUCKET, Key=KEY)
    doc["upload"]["etag"] = head.get("ETag")
    c.check("HEAD: its size, GLACIER, a multipart entity tag",
            head.get("ContentLength") == a.size and head.get("StorageClass") == "GLACIER"
            and head.get("ETag", "").rstrip('"').rsplit("-", 1)[-1].isdigit()
            and "-" in head.get("ETag", ""), head)

    rss.step("archive")
    t0 = time.monotonic()
    job = wait_job(a, home, a.timeout)
    doc["archive"] = {"seconds": round(time.monotonic() - t0, 1)}
    if not c.check("the object's job s3-large ended ok", job is not None
                   and job.get("status") == "ok", job):
        return
    listing = tl(a, home, "ls", job["job_id"])
    files = [e for e in listing.get("entries", []) if e.get("type") == "file"]
    doc["archive"].update(job=job["job_id"], volumes=job.get("volumes"), files=len(files),
                          block_size=job.get("block_size"),
                          start={k: files[0].get(k) for k in ("volume", "block", "offset")}
                          if files else None)
    c.check("the job holds one file, the object's whole size, on one cartridge",
            len(files) == 1 and files[0].get("size") == a.size and len(job.get("volumes", [])) == 1,
            (len(files), job.get("volumes")))
    run = run_of_blocks(home, job["job_id"], a.size)
    doc["archive"]["run"] = run
    c.check("its blocks are one contiguous run from ls's start",
            run.get("one_run") and files and run.get("first_block") == files[0].get("block")
            and run.get("first_offset") == files[0].get("offset"), run)

    until = time.monotonic() + a.timeout
    while not released(home, BUCKET, [KEY]) and time.monotonic() < until:
        time.sleep(1)
    doc["archive"]["released_after_seconds"] = round(time.monotonic() - t0, 1)
    if not c.check("the disk copy was given back (the job read back), so the restore reads tape",
                   released(home, BUCKET, [KEY]) == 1):
        return

    rss.step("restore")
    t0 = time.monotonic()
    p.boto().restore_object(Bucket=BUCKET, Key=KEY, RestoreRequest={
        "Days": 1, "GlacierJobParameters": {"Tier": "Expedited"}})
    until, restored = time.monotonic() + a.timeout, None
    while time.monotonic() < until:
        restored = RESTORED.match(p.head_restore(BUCKET, KEY) or "")
        if restored:
            break
        time.sleep(1)
    doc["restore"] = {"seconds": round(time.monotonic() - t0, 1)}
    if not c.check("RestoreObject (Expedited) ends", restored is not None,
                   p.head_restore(BUCKET, KEY)):
        return

    rss.step("get")
    secs, n, got = get_timed(p)
    rate = n / secs / 1e6
    native = model_rate(a)
    doc["get"] = {"seconds": round(secs, 2), "mb_per_s": round(rate, 1),
                  "model_native_mb_per_s": native, "ratio_to_model": round(rate / native, 2)}
    c.check("GET gives the object back identical (SHA-256)", n == a.size and got == sha,
            (n, got, sha))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default=None, help="a folder for the home (emptied first)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--quick", action="store_true", help="512 MiB unless --size says")
    ap.add_argument("--size", type=parse_size, default=None, help="the object's bytes (default 5G)")
    ap.add_argument("--rss-limit", type=parse_size, default=parse_size("256M"),
                    help="the most resident memory the server may use (default 256M)")
    ap.add_argument("--batch-age", type=int, default=2, help="seconds (default 2)")
    ap.add_argument("--capacity", type=parse_size, default=parse_size("16G"),
                    help="bytes per cartridge; the LTO-9 model is scaled to it (default 16G)")
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds a step may take")
    ap.add_argument("--plain", action="store_true", help="serve plain HTTP instead of HTTPS")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.size is None:
        a.size = (512 if a.quick else 5 << 10) * MIB
    # What the server needs of the options: the restore is Expedited.
    a.archive, a.standard_window, a.bulk_window = True, 10, 10
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"{a.bin} is not an executable (cargo build --release -p tapeloom "
                 f"--features tapeloom/test-hooks)")
    a.work = a.work or os.path.join(default_work_parent(), "tapeloom-s3-large")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    free = shutil.disk_usage(a.work).free
    if free < 3 * a.size + (1 << 30):
        sys.exit(f"{a.work}: {free >> 20} MiB free, and the run needs about {3 * a.size >> 20} MiB")
    home = os.path.join(a.work, "home")
    key, scale = new_home(a, home, [BUCKET], ["--batch-age", str(a.batch_age)])
    c = Checks()
    p = Pass(a, c, "plain" if a.plain else "tls", key, home, a.work)
    doc = {"bench": "s3_large", "quick": a.quick, "size": a.size, "transport": p.t, "scale": scale}
    p.start()
    rss = RssSampler(p.server.p.pid)
    t0 = time.monotonic()
    try:
        steps(a, p, c, doc, rss)
    except Exception as e:  # noqa: BLE001 (a crash is a failed check, and the document is printed)
        c.check("the run went to its end", False, f"{type(e).__name__}: {e}")
    finally:
        rss.stop()
        p.server.stop()
    doc["rss"] = {"peak_mib": round(rss.peak / MIB, 1), "samples": rss.samples,
                  "limit_mib": a.rss_limit // MIB,
                  "peak_mib_per_step": {k: round(v / MIB, 1) for k, v in rss.steps.items()}}
    c.check(f"the server's peak RSS is under {a.rss_limit // MIB} MiB",
            rss.samples > 0 and rss.peak < a.rss_limit, doc["rss"])
    doc.update(seconds=round(time.monotonic() - t0, 1), checks=c.count, failed=c.failed,
               **{"pass": not c.failed})
    if not a.keep and not c.failed:
        shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(doc, indent=2))
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
