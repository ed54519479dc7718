#!/usr/bin/env python3
"""The S3 front end under load: --uploaders clients (16) PUT objects and
--restorers clients (4) restore archived ones and read them back, all at once,
for --seconds (300), while a probe asks the server's `/metrics` and its status
page's document (`/api/status`) once a second. One JSON document on stdout
(progress on stderr); it exits 1 when a check failed.

The home has a virtual library of two drives (the LTO-9 model at the scale of
--capacity cartridges, the virtual clock) and a bucket archived in batches of
--batch-age seconds; the server runs with its default limits and budgets, over
HTTPS with its certificate. Uploads are 64 KiB to --largest bytes, GLACIER and
STANDARD in turn, each read back once in ten (the STANDARD ones). A restorer
picks an archived GLACIER object, asks its restore (Expedited or Standard in
turn), waits for HEAD to say it ended, and reads it back, comparing its size
and MD5.

Checks: no answer of the S3 front end is a 5xx other than 503 SlowDown (each
answer's status and code is counted); every probe answers 200 within one
second; some restores end and read back whole; uploads answered 200 read back
whole.

  target/s3-venv/bin/python bench/s3_load.py
  target/s3-venv/bin/python bench/s3_load.py --quick
"""
import argparse, collections, hashlib, json, os, random, shutil, ssl, subprocess, sys
import threading, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != HERE] + [HERE]
import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError, BotoCoreError  # noqa: E402

from engine import default_work_parent, log, parse_size, REPO  # noqa: E402
from s3_glacier import Checks, new_home, tl  # noqa: E402


class Tally:
    """Every S3 answer by (operation, status, code), and the failures seen."""

    def __init__(self):
        self.lock = threading.Lock()
        self.answers = collections.Counter()
        self.bad = []

    def add(self, op, status, code=""):
        with self.lock:
            self.answers[(op, status, code)] += 1
            if status >= 500 and not (status == 503 and code == "SlowDown"):
                self.bad.append((op, status, code))

    def call(self, op, f):
        """Runs one S3 call: its result, or None when it was refused."""
        try:
            r = f()
        except ClientError as e:
            self.add(op, e.response["ResponseMetadata"]["HTTPStatusCode"],
                     e.response["Error"].get("Code", ""))
            return None
        except BotoCoreError as e:
            self.add(op, 0, type(e).__name__)
            return None
        self.add(op, r["ResponseMetadata"]["HTTPStatusCode"])
        return r


def start(a, home, log_path):
    args = [a.bin, "--home", home, "server", "--listen", "127.0.0.1:0", "--s3-listen",
            "127.0.0.1:0", "--s3-standard-window", "2", "--s3-bulk-window", "5"]
    err = open(log_path, "a")
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True)
    lines = [p.stdout.readline().strip() for _ in range(3)]
    if not lines[2].startswith("S3 on "):
        p.kill()
        raise RuntimeError(f"the server did not start ({lines}): see {log_path}")
    api = lines[0].removeprefix("listening on ").replace("127.0.0.1", "localhost")
    s3 = lines[2].removeprefix("S3 on ").replace("127.0.0.1", "localhost")
    return p, api, s3


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--quick", action="store_true", help="60 seconds")
    ap.add_argument("--seconds", type=int, default=None, help="(default 300)")
    ap.add_argument("--uploaders", type=int, default=16)
    ap.add_argument("--restorers", type=int, default=4)
    ap.add_argument("--largest", type=parse_size, default=parse_size("4M"))
    ap.add_argument("--capacity", type=parse_size, default=parse_size("8G"))
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--batch-age", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    a.seconds = a.seconds or (60 if a.quick else 300)
    work = a.work or os.path.join(default_work_parent(), "tapeloom-s3-load")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    home = os.path.join(work, "home")
    (ak, sk), scale = new_home(a, home, ["load"], ["--batch-age", str(a.batch_age)], drives=2)
    token = tl(a, home, "server", "token", "add", "probe", "--admin")["token"]
    log_path = os.path.join(work, "server.log")
    p, api, url = start(a, home, log_path)
    ca = os.path.join(home, "server", "cert.pem")
    c, tally = Checks(), Tally()
    stop = threading.Event()
    stored = {}  # key -> (size, md5, class, when)
    stored_lock = threading.Lock()
    figures = collections.Counter()

    def client():
        return boto3.client("s3", endpoint_url=url, aws_access_key_id=ak, aws_secret_access_key=sk,
                            region_name="us-east-1", verify=ca,
                            config=Config(s3={"addressing_style": "path"},
                                          retries={"max_attempts": 1}))

    def uploader(n):
        s3, rng, i = client(), random.Random(a.seed * 1000 + n), 0
        while not stop.is_set():
            body = rng.randbytes(rng.randrange(64 << 10, a.largest + 1))
            cls = "GLACIER" if i % 2 == 0 else "STANDARD"
            key = f"u{n:02}/{i:06}"
            if tally.call("PutObject", lambda: s3.put_object(Bucket="load", Key=key, Body=body,
                                                             StorageClass=cls)):
                with stored_lock:
                    stored[key] = (len(body), hashlib.md5(body).hexdigest(), cls, time.monotonic())
                figures["uploaded_bytes"] += len(body)
                if cls == "STANDARD" and i % 10 == 1:
                    r = tally.call("GetObject", lambda: s3.get_object(Bucket="load", Key=key))
                    if r is not None:
                        same = hashlib.md5(r["Body"].read()).hexdigest() == stored[key][1]
                        figures["standard_read_back" if same else "standard_read_back_differs"] += 1
            i += 1

    def restorer(n):
        s3, rng, i = client(), random.Random(a.seed * 2000 + n), 0
        while not stop.is_set():
            with stored_lock:
                old = [k for k, v in stored.items()
                       if v[2] == "GLACIER" and time.monotonic() - v[3] > 3 * a.batch_age]
            if not old:
                time.sleep(1)
                continue
            key = rng.choice(old)
            tier = "Expedited" if i % 2 == 0 else "Standard"
            i += 1
            r = tally.call("RestoreObject", lambda: s3.restore_object(
                Bucket="load", Key=key, RestoreRequest={"Days": 1,
                                                        "GlacierJobParameters": {"Tier": tier}}))
            if r is None:
                continue
            t0 = time.monotonic()
            while not stop.is_set() and time.monotonic() - t0 < 300:
                h = tally.call("HeadObject", lambda: s3.head_object(Bucket="load", Key=key))
                if h is not None and h.get("Restore", "").startswith('ongoing-request="false"'):
                    g = tally.call("GetObject", lambda: s3.get_object(Bucket="load", Key=key))
                    if g is not None:
                        same = hashlib.md5(g["Body"].read()).hexdigest() == stored[key][1]
                        figures["restored_read_back" if same else "restored_read_back_differs"] += 1
                        figures["restore_seconds_total"] += round(time.monotonic() - t0, 1)
                    break
                time.sleep(1)

    ctx = ssl.create_default_context(cafile=ca)
    probes = []

    def probe():
        while not stop.is_set():
            for path in ("/metrics", "/api/status"):
                t0 = time.monotonic()
                req = urllib.request.Request(api + path,
                                             headers={"Authorization": f"Bearer {token}"})
                try:
                    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                        r.read()
                        status = r.status
                except Exception as e:  # noqa: BLE001 (a probe that fails is counted, not raised)
                    status = getattr(e, "code", 0)
                probes.append((path, status, time.monotonic() - t0))
            time.sleep(1)

    threads = [threading.Thread(target=uploader, args=(n,)) for n in range(a.uploaders)]
    threads += [threading.Thread(target=restorer, args=(n,)) for n in range(a.restorers)]
    threads.append(threading.Thread(target=probe))
    log(f"{a.uploaders} uploaders and {a.restorers} restorers for {a.seconds} s")
    t0 = time.monotonic()
    for t in threads:
        t.start()
    try:
        time.sleep(a.seconds)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=400)
        p.terminate()
        p.wait(timeout=120)
    took = time.monotonic() - t0
    worst = max((s for _, _, s in probes), default=None)
    slow = [x for x in probes if x[2] > 1.0 or x[1] != 200]
    c.check("no 5xx but 503 SlowDown", not tally.bad, tally.bad[:10])
    c.check("every probe of /metrics and /api/status answered 200 within 1 s", probes and not slow,
            slow[:10])
    c.check("restores ended and read back whole", figures["restored_read_back"] > 0
            and figures["restored_read_back_differs"] == 0, dict(figures))
    c.check("STANDARD objects read back whole", figures["standard_read_back_differs"] == 0,
            dict(figures))
    answers = collections.Counter()
    for (op, status, code), n in tally.answers.items():
        answers[f"{op} {status}{' ' + code if code else ''}"] += n
    doc = {"bench": "s3_load", "seconds": round(took, 1), "uploaders": a.uploaders,
           "restorers": a.restorers, "scale": scale, "objects_stored": len(stored),
           "uploaded_mb_s": round(figures["uploaded_bytes"] / took / 1e6, 1),
           "restores_read_back": figures["restored_read_back"],
           "mean_restore_seconds": round(figures["restore_seconds_total"]
                                         / max(figures["restored_read_back"], 1), 1),
           "probes": len(probes), "slowest_probe_seconds": round(worst, 3) if worst else None,
           "answers": dict(sorted(answers.items())), "checks": c.count, "failed": c.failed,
           "pass": not c.failed}
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(doc, indent=2))
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
