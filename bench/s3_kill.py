#!/usr/bin/env python3
"""Kill -9 trials of the server while S3 clients upload and restores run, as
one JSON document on stdout (progress on stderr); it exits 1 when a check
failed. What it holds: nothing the S3 front end acknowledged is lost.

Each of --trials trials has a fresh home: a virtual library of one drive (the
LTO-9 model scaled to --capacity cartridges, the virtual clock), an access key
and a bucket `kill` archived in batches of one second or --batch-objects
objects, served over HTTPS with a Standard restore window of two seconds. A
trial:

  1. PUTs --seeds GLACIER objects and waits until the server has archived
     them, read their job back and given their disk copies back (the catalog
     says released), so that restoring them reads tape;
  2. starts 8 clients, each PUTting objects one after another: client 0 by
     hand (a signed UNSIGNED-PAYLOAD PUT whose body it sends slowly, counting
     the bytes that left), the others with boto3, one in ten of their objects
     a multipart upload of parts of 5 MiB; sizes from 1 KiB to 4 MiB (5 to
     11 MiB for multipart), STANDARD or GLACIER at random. Beside them 2
     restorers restore the seeds one after another (one Expedited, one
     Standard), each waiting for its restore to end and reading the object;
  3. kills the server with SIGKILL at a moment drawn (seeded by --seed)
     uniformly in [0.3, --window] seconds after the clients began, and notes
     what the server's log said last;
  4. starts the server again and checks (each trial's `failed` names the ones
     that failed):
       acknowledged   every object whose PUT (or CompleteMultipartUpload) was
                      answered 200 is listed with its size and reads back
                      identical by SHA-256: a GLACIER one after RestoreObject,
                      waiting for the restore and GET;
       cut            no object whose upload was cut is listed: a slow PUT
                      whose body had not all left, a multipart upload killed
                      before its CompleteMultipartUpload was sent;
       unanswered     every other upload that got no answer is absent, or
                      listed whole and reading back identical;
       nothing_else   the listing holds no other key;
       restores       every restore answered 202 before the kill and not yet
                      seen ended ends without being asked again, and its
                      object reads back identical;
       catalog_check  `tapeloom catalog check` (with the server stopped) says
                      ok, and the server's log has no "panicked".

Each trial reports when it killed, what was in flight and what the server
was doing, and its counts. Run it with the Python of the test command's
virtual environment, which has boto3, against a binary built with `cargo
build --release -p tapeloom --features tapeloom/test-hooks`:

  target/s3-venv/bin/python bench/s3_kill.py                  # 20 trials
  target/s3-venv/bin/python bench/s3_kill.py --quick          # 4 trials
"""
import argparse, hashlib, http.client, json, math, os, random, shutil, sqlite3, ssl, sys
import threading, time

# bench/copy.py would stand for the standard library's copy, which botocore
# imports: this folder is searched last.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != HERE] + [HERE]
import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

from engine import default_work_parent, log, parse_size, REPO  # noqa: E402
from s3_bad import Raw, Signer, object_path, utcnow  # noqa: E402
from s3_glacier import Checks, Pass, RESTORED, new_home, run  # noqa: E402

BUCKET = "kill"
CLIENTS, RESTORERS = 8, 2
MIB = 1 << 20
PART = 5 * MIB


def sha(data):
    return hashlib.sha256(data).hexdigest()


def client(p):
    return boto3.client("s3", endpoint_url=p.url, aws_access_key_id=p.ak,
                        aws_secret_access_key=p.sk, region_name="us-east-1",
                        verify=p.ca or True,
                        config=Config(s3={"addressing_style": "path"}, connect_timeout=5,
                                      read_timeout=120, retries={"total_max_attempts": 1}))


class Upload:
    """One upload and what its client saw: `ok` (answered 200), `cut` (it
    cannot have been stored) or `unanswered`."""

    def __init__(self, key, size, cls, kind, digest):
        self.key, self.size, self.cls, self.kind, self.sha = key, size, cls, kind, digest
        self.state, self.why = "sending", None

    def doc(self):
        return {"key": self.key, "size": self.size, "class": self.cls, "kind": self.kind,
                "state": self.state, "why": self.why}


def slow_put(p, raw, signer, up, data, killed):
    """A PUT by hand whose body leaves in pieces of 16 KiB with a pause
    between: cut when the connection broke before every byte left."""
    path = object_path(BUCKET, up.key)
    h, _ = signer.sign("PUT", path, {"host": raw.netloc, "content-length": str(len(data)),
                                     "x-amz-storage-class": up.cls}, "UNSIGNED-PAYLOAD", utcnow())
    ctx = ssl.create_default_context(cafile=raw.ca) if raw.tls else None
    c = (http.client.HTTPSConnection(raw.host, raw.port, context=ctx, timeout=60) if raw.tls
         else http.client.HTTPConnection(raw.host, raw.port, timeout=60))
    sent = 0
    try:
        c.putrequest("PUT", path, skip_host=True, skip_accept_encoding=True)
        for k, v in h.items():
            c.putheader(k, v)
        c.endheaders()
        while sent < len(data):
            c.send(data[sent:sent + (16 << 10)])
            sent = min(len(data), sent + (16 << 10))
            if killed.is_set():
                # The server is dead: what is left cannot leave.
                break
            time.sleep(0.01)
        if sent < len(data):
            raise ConnectionError("the server went away")
        r = c.getresponse()
        body = r.read()
        up.state = "ok" if r.status == 200 else "unanswered"
        up.why = None if r.status == 200 else f"{r.status} {body[:200]!r}"
    except (OSError, http.client.HTTPException) as e:
        up.state = "cut" if sent < len(data) else "unanswered"
        up.why = f"{type(e).__name__}: {e} after {sent} of {len(data)} bytes"
    finally:
        c.close()


def multipart(s3, up, data):
    """A multipart upload of parts of 5 MiB: cut when it broke before its
    CompleteMultipartUpload was sent."""
    completing = False
    try:
        uid = s3.create_multipart_upload(Bucket=BUCKET, Key=up.key, StorageClass=up.cls)["UploadId"]
        parts = []
        for n, at in enumerate(range(0, len(data), PART), 1):
            r = s3.upload_part(Bucket=BUCKET, Key=up.key, UploadId=uid, PartNumber=n,
                               Body=data[at:at + PART])
            parts.append({"PartNumber": n, "ETag": r["ETag"]})
        completing = True
        s3.complete_multipart_upload(Bucket=BUCKET, Key=up.key, UploadId=uid,
                                     MultipartUpload={"Parts": parts})
        up.state = "ok"
    except Exception as e:  # noqa: BLE001 (every way an upload breaks is recorded)
        up.state = "unanswered" if completing else "cut"
        up.why = f"{type(e).__name__}: {e}"


def client_loop(p, n, rng, uploads, lock, stop, killed):
    """Client `n`: uploads one object after another until `stop`, which is
    set just before the server is `killed`."""
    s3, raw, signer = client(p), Raw(p.url, p.ca), Signer(p.ak, p.sk)
    j = 0
    while not stop.is_set():
        cls = rng.choice(["STANDARD", "GLACIER"])
        if n == 0:
            kind, size = "slow", rng.randrange(64 << 10, 512 << 10)
        elif rng.random() < 0.1:
            kind, size = "multipart", rng.randrange(PART + 1, 11 * MIB)
        else:
            kind, size = "put", int(math.exp(rng.uniform(math.log(1024), math.log(4 * MIB))))
        data = rng.randbytes(size)
        up = Upload(f"c{n}/{j:04}", size, cls, kind, sha(data))
        j += 1
        with lock:
            uploads.append(up)
        if kind == "slow":
            slow_put(p, raw, signer, up, data, killed)
        elif kind == "multipart":
            multipart(s3, up, data)
        else:
            try:
                s3.put_object(Bucket=BUCKET, Key=up.key, Body=data, StorageClass=cls)
                up.state = "ok"
            except Exception as e:  # noqa: BLE001 (every way an upload breaks is recorded)
                up.state, up.why = "unanswered", f"{type(e).__name__}: {e}"


def restore_loop(p, tier, seeds, digests, restores, stop):
    """Restores the seeds one after another at `tier`, each read once its
    restore ended: per key, `asked` (202), then `read` or `differs`."""
    s3 = client(p)
    for key in seeds:
        if stop.is_set():
            return
        try:
            r = s3.restore_object(Bucket=BUCKET, Key=key, RestoreRequest={
                "Days": 1, "GlacierJobParameters": {"Tier": tier}})
            if r["ResponseMetadata"]["HTTPStatusCode"] != 202:
                restores[key] = f"answered {r['ResponseMetadata']['HTTPStatusCode']}"
                continue
            restores[key] = "asked"
            while not stop.is_set():
                head = s3.head_object(Bucket=BUCKET, Key=key).get("Restore") or ""
                if RESTORED.match(head):
                    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
                    restores[key] = "read" if sha(body) == digests[key] else "differs"
                    break
                time.sleep(0.3)
        except Exception:  # noqa: BLE001 (the kill breaks every request in flight)
            return


def released(home, bucket, keys):
    """How many of `keys` of `bucket` the home's SQLite catalog says were
    released (their disk copy given back: on tape only)."""
    db = sqlite3.connect(f"file:{os.path.join(home, 'catalog.sqlite')}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT key FROM s3_objects WHERE bucket = ? AND deleted_ns IS NULL "
                          "AND released_ns IS NOT NULL", (bucket,)).fetchall()
    finally:
        db.close()
    got = {bytes(r[0]).decode() for r in rows}
    return sum(1 for k in keys if k in got)


def read_back(p, keys, digests, cls, timeout):
    """Reads `keys` back, restoring each GLACIER one first (Expedited): the
    keys that read back identical, and why the others did not."""
    s3 = client(p)
    why = {}
    glacier = [k for k in keys if cls[k] == "GLACIER"]
    for k in glacier:
        try:
            s3.restore_object(Bucket=BUCKET, Key=k, RestoreRequest={
                "Days": 1, "GlacierJobParameters": {"Tier": "Expedited"}})
        except ClientError as e:
            if e.response["Error"].get("Code") != "RestoreAlreadyInProgress":
                why[k] = f"restore: {e.response['Error'].get('Code')}"
    waiting = set(glacier) - set(why)
    until = time.monotonic() + timeout
    while waiting and time.monotonic() < until:
        waiting = {k for k in waiting
                   if not RESTORED.match(s3.head_object(Bucket=BUCKET, Key=k).get("Restore") or "")}
        if waiting:
            time.sleep(0.5)
    for k in waiting:
        why[k] = "the restore did not end"
    same = []
    for k in keys:
        if k in why:
            continue
        try:
            body = s3.get_object(Bucket=BUCKET, Key=k)["Body"].read()
        except ClientError as e:
            why[k] = f"GET: {e.response['Error'].get('Code')}"
            continue
        if sha(body) == digests[k]:
            same.append(k)
        else:
            why[k] = f"GET gave {len(body)} other bytes"
    return same, why


def wait_restored(p, keys, timeout):
    """Waits, without asking again, until the restores of `keys` ended: those
    that did not."""
    s3, left = client(p), set(keys)
    until = time.monotonic() + timeout
    while left and time.monotonic() < until:
        left = {k for k in left
                if not RESTORED.match(s3.head_object(Bucket=BUCKET, Key=k).get("Restore") or "")}
        if left:
            time.sleep(0.5)
    return sorted(left)


def last_event(log_path, since):
    """The server log's lines from byte `since` on: how many archive jobs and
    restore readings it logged, and its last line."""
    with open(log_path, errors="replace") as f:
        f.seek(since)
        lines = [x.rstrip() for x in f if x.strip()]
    return {"archived": sum("S3 objects archived" in x for x in lines),
            "restore_readings": sum("S3 restores: one reading" in x for x in lines),
            "released": sum("S3 disk copies released" in x for x in lines),
            "last": lines[-1][:300] if lines else None}


def kill_and_check(a, p, out, rng, at):
    """Steps 1 to 4 of a trial on the started server of `p`; the figures go
    to `out`."""
    home, work = p.home, p.work
    s3 = client(p)
    # 1. The seeds, on tape only.
    seeds = [f"seed/{i}" for i in range(a.seeds)]
    digests, cls, sizes = {}, {}, {}
    for k in seeds:
        data = rng.randbytes(rng.randrange(64 << 10, MIB))
        s3.put_object(Bucket=BUCKET, Key=k, Body=data, StorageClass="GLACIER")
        digests[k], cls[k], sizes[k] = sha(data), "GLACIER", len(data)
    until = time.monotonic() + a.timeout
    while released(home, BUCKET, seeds) < len(seeds) and time.monotonic() < until:
        time.sleep(0.5)
    out["seeds_released"] = released(home, BUCKET, seeds)
    if not p.check("the seeds were archived and released", out["seeds_released"] == len(seeds),
                   out["seeds_released"]):
        return

    # 2. Clients and restorers; 3. the kill.
    uploads, lock, restores = [], threading.Lock(), {}
    stop, killed = threading.Event(), threading.Event()
    log_at = os.path.getsize(os.path.join(work, "server.log"))
    threads = [threading.Thread(target=client_loop,
                                args=(p, i, random.Random(rng.random()), uploads, lock, stop,
                                      killed))
               for i in range(CLIENTS)]
    halves = [seeds[i::RESTORERS] for i in range(RESTORERS)]
    threads += [threading.Thread(target=restore_loop,
                                 args=(p, tier, half, digests, restores, stop))
                for tier, half in zip(["Expedited", "Standard"], halves)]
    for t in threads:
        t.start()
    time.sleep(at)
    # No upload or restore begins from here on; those in flight are cut.
    stop.set()
    p.server.p.kill()
    killed.set()
    in_flight = {k: sum(1 for u in uploads if u.state == "sending" and u.kind == k)
                 for k in ("put", "multipart", "slow")}
    p.server.p.wait()
    p.server.err.close()
    for t in threads:
        t.join(timeout=180)
    out["server_at_kill"] = last_event(os.path.join(work, "server.log"), log_at)
    out["in_flight_at_kill"] = in_flight
    states = {s: [u for u in uploads if u.state == s] for s in ("ok", "cut", "unanswered")}
    out["uploads"] = {s: len(v) for s, v in states.items()}
    out["uploads"].update(
        ok_bytes=sum(u.size for u in states["ok"]),
        ok_glacier=sum(1 for u in states["ok"] if u.cls == "GLACIER"),
        ok_multipart=sum(1 for u in states["ok"] if u.kind == "multipart"),
        still_sending=sum(1 for u in uploads if u.state == "sending"))
    out["restores_before_kill"] = {s: sum(1 for v in restores.values() if v == s)
                                   for s in ("asked", "read", "differs")}
    p.check("no restore read before the kill gave other bytes",
            out["restores_before_kill"]["differs"] == 0, restores)

    # 4. Started again: the checks.
    p.start()
    for u in uploads:
        digests[u.key], cls[u.key], sizes[u.key] = u.sha, u.cls, u.size
    pending = [k for k, v in restores.items() if v == "asked"]
    left = wait_restored(p, pending, a.timeout)
    out["restores_finished_after"] = len(pending) - len(left)
    p.check("restores: every restore asked before the kill ends after the restart",
            not left, left)
    listed = p.objects(BUCKET)
    by_key = {u.key: u for u in uploads}
    acked = seeds + [u.key for u in states["ok"]]
    missing = [k for k in acked if k not in listed or listed[k]["Size"] != sizes[k]]
    p.check("acknowledged: every acknowledged object is listed with its size", not missing,
            missing[:5])
    cut_listed = [u.key for u in states["cut"] if u.key in listed]
    p.check("cut: no cut upload is listed", not cut_listed,
            [by_key[k].doc() for k in cut_listed[:3]])
    extra = sorted(set(listed) - set(seeds) - set(by_key))
    p.check("nothing_else: the listing holds no other key", not extra, extra[:5])
    unanswered = [u.key for u in states["unanswered"] + [u for u in uploads
                                                           if u.state == "sending"]
                  if u.key in listed]
    to_read = [k for k in acked + unanswered if k in listed]
    same, why = read_back(p, to_read, digests, cls, a.timeout)
    out["read_back"] = {"objects": len(to_read), "identical": len(same),
                        "unanswered_listed": len(unanswered)}
    bad = {k: why.get(k) for k in acked if k in listed and k not in same}
    p.check("acknowledged: every acknowledged object reads back identical", not bad,
            list(bad.items())[:5])
    bad = {k: why.get(k) for k in unanswered if k not in same}
    p.check("unanswered: an upload without an answer that is listed is whole", not bad,
            list(bad.items())[:5])


def trial(a, c, n, at):
    work = os.path.join(a.work, f"t{n:02}")
    os.makedirs(work)
    home = os.path.join(work, "home")
    key, _ = new_home(a, home, [BUCKET], ["--batch-age", "1", "--batch-objects",
                                          str(a.batch_objects)])
    p = Pass(a, c, f"trial {n}", key, home, work)
    out = {"trial": n, "kill_at_s": round(at, 2)}
    failed0 = len(c.failed)
    rng = random.Random(a.seed * 1000 + n)
    p.start()
    try:
        kill_and_check(a, p, out, rng, at)
    except Exception as e:  # noqa: BLE001 (a crash is a failed check, and the next trial runs)
        p.check("the trial ran to its end", False, f"{type(e).__name__}: {e}")
    finally:
        if p.server.p.poll() is None:
            p.server.stop()
    rc, text, err, _ = run([a.bin, "--home", home, "--json", "catalog", "check"])
    ok = rc == 0 and json.loads(text or "{}").get("ok") is True
    p.check("catalog_check: `tapeloom catalog check` says ok", ok, (rc, text[-300:], err[-300:]))
    with open(os.path.join(work, "server.log"), errors="replace") as f:
        panics = [x.strip()[:300] for x in f if "panicked" in x]
    p.check("catalog_check: the server's log has no \"panicked\"", not panics, panics[:3])
    out["failed"] = c.failed[failed0:]
    if not out["failed"] and not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default=None, help="a folder for the homes (emptied first)")
    ap.add_argument("--keep", action="store_true", help="keep the homes of trials that passed")
    ap.add_argument("--quick", action="store_true", help="4 trials unless --trials says")
    ap.add_argument("--trials", type=int, default=None, help="(default 20)")
    ap.add_argument("--window", type=float, default=6.0,
                    help="the latest kill, in seconds after the clients began (default 6)")
    ap.add_argument("--seeds", type=int, default=6, help="GLACIER objects restored (default 6)")
    ap.add_argument("--batch-objects", type=int, default=40, help="(default 40)")
    ap.add_argument("--capacity", type=parse_size, default=parse_size("8G"),
                    help="bytes per cartridge; the LTO-9 model is scaled to it (default 8G)")
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=300, help="seconds a wait may take")
    ap.add_argument("--plain", action="store_true", help="serve plain HTTP instead of HTTPS")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.trials is None:
        a.trials = 4 if a.quick else 20
    # What the server needs of the options: a short Standard window.
    a.archive, a.standard_window, a.bulk_window = True, 2, 10
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"{a.bin} is not an executable (cargo build --release -p tapeloom "
                 f"--features tapeloom/test-hooks)")
    a.work = a.work or os.path.join(default_work_parent(), "tapeloom-s3-kill")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    c = Checks()
    rng = random.Random(a.seed)
    moments = [rng.uniform(0.3, a.window) for _ in range(a.trials)]
    t0 = time.monotonic()
    trials = []
    for n, at in enumerate(moments):
        log(f"trial {n}: kill at {at:.2f} s")
        trials.append(trial(a, c, n, at))
        log(f"trial {n}: {trials[-1].get('uploads')}, failed {len(trials[-1].get('failed', []))}")
    total = {s: sum(t.get("uploads", {}).get(s, 0) for t in trials)
             for s in ("ok", "cut", "unanswered")}
    doc = {"bench": "s3_kill", "quick": a.quick, "seed": a.seed, "trials": trials,
           "uploads": total, "trials_failed": sum(1 for t in trials if t["failed"]),
           "seconds": round(time.monotonic() - t0, 1), "checks": c.count, "failed": c.failed,
           "pass": not c.failed}
    if not c.failed and not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(doc, indent=2))
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
