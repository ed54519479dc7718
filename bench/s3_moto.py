#!/usr/bin/env python3
"""The storage classes' states, walked with boto3 against tapeloom's S3 front
end and against moto's server mode (`moto[server]` from PyPI), step by step,
and compared. One JSON document on stdout (progress and the table of
differences on stderr); it exits 1 when a step differs.

The walk: an object of each class (STANDARD, GLACIER, DEEP_ARCHIVE) is put,
read with HEAD and GET, restored (RestoreObject with Days=1, Tier Standard)
three times: to start a restore, while it runs, and once it has ended, read
again, listed with `x-amz-optional-object-attributes: RestoreStatus`, and
deleted; then the error cases: a PUT of an unknown storage class, a restore
without Days and a restore of a missing key. Each step is recorded as a tuple:
the status, the error code, the storage class the answer names (the
StorageClass boto3 gives, or the `<StorageClass>` of an InvalidObjectState
error), and its `x-amz-restore` header reduced to its form (none, ongoing, or
ended with an expiry date in HTTP's form); a GET also as whether it gave the
bytes put; a listing as its keys with their classes and the form of each
RestoreStatus.

Every step's tuples must be equal, save the time a restore takes: moto ends a
restore at once, while with tapeloom the walk polls HEAD until it ends. A few
answers moto 5 does not give (it never answers RestoreAlreadyInProgress, has
no RestoreStatus in listings, takes a restore without Days, and cannot move
its clock past an expiry); for those steps tapeloom's tuple is compared with
what Amazon S3 answers instead, and the step says so. To reach an expiry,
tapeloom's server is stopped and started again with the test hook
TAPELOOM_NOW past it (the binary must be built with `--features
tapeloom/test-hooks`). tapeloom's home has a virtual library with the LTO-9
model at a small scale and the virtual clock, and its bucket is archived in
batches of --batch-age seconds. --no-archive leaves out every step that needs
archiving or RestoreObject (for a tapeloom that has neither).

Run it with the Python of the test command's virtual environment, which has
boto3 and moto:

  target/s3-venv/bin/python bench/s3_moto.py
  target/s3-venv/bin/python bench/s3_moto.py --no-archive
"""
import argparse, datetime, email.utils, hashlib, json, os, re, shutil, signal, socket
import subprocess, sys, time

# bench/copy.py would stand for the standard library's copy, which botocore
# imports: this folder is searched last.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != HERE] + [HERE]
import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

from engine import default_work_parent, log, REPO  # noqa: E402

CLASSES = ["STANDARD", "GLACIER", "DEEP_ARCHIVE"]
ARCHIVED = CLASSES[1:]
BUCKET = "states"
RESTORED = re.compile(r'^ongoing-request="false", expiry-date="([A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} '
                      r'\d{4} \d{2}:\d{2}:\d{2} GMT)"$')
RESTORE = {"Days": 1, "GlacierJobParameters": {"Tier": "Standard"}}


def restore_form(header):
    """An `x-amz-restore` header reduced to its form."""
    if header is None:
        return None
    if header == 'ongoing-request="true"':
        return "ongoing"
    m = RESTORED.match(header)
    if m and email.utils.parsedate_to_datetime(m.group(1)):
        return "ended, expiry-date"
    return f"malformed: {header}"


def answer(f):
    """Calls f: (its response or None, the step's tuple)."""
    try:
        r = f()
    except ClientError as e:
        md, err = e.response["ResponseMetadata"], e.response["Error"]
        # Only InvalidObjectState names the object's class (InvalidStorageClass
        # may name the class asked for).
        named = err.get("StorageClass") if err.get("Code") == "InvalidObjectState" else None
        return None, (md["HTTPStatusCode"], err.get("Code"), named,
                      restore_form(md.get("HTTPHeaders", {}).get("x-amz-restore")))
    # What boto3 gives its caller: an answer's header that the operation does
    # not define (moto names the class in PutObject's) is no part of it.
    return r, (r["ResponseMetadata"]["HTTPStatusCode"], None, r.get("StorageClass"),
               restore_form(r.get("Restore")))


def listing(s3):
    """ListObjectsV2 with RestoreStatus: (status, error, [(key, class, restore)])."""
    r, t = answer(lambda: s3.list_objects_v2(Bucket=BUCKET, OptionalObjectAttributes=["RestoreStatus"]))
    if r is None:
        return t[:2] + ([],)
    rows = []
    for o in r.get("Contents", []):
        rs = o.get("RestoreStatus")
        form = None
        if rs is not None:
            form = ("in progress" if rs.get("IsRestoreInProgress") else
                    "ended, expiry" if isinstance(rs.get("RestoreExpiryDate"), datetime.datetime)
                    else f"malformed: {rs}")
        rows.append((o["Key"], o.get("StorageClass"), form))
    return (t[0], t[1], rows)


def body_sha(r):
    return hashlib.sha256(r["Body"].read()).hexdigest() if r is not None else None


class Walk:
    """The walk's steps against one endpoint, by step name."""

    def __init__(self, name, connect, a):
        self.name, self.connect, self.a = name, connect, a
        self.s3 = connect()
        self.steps = {}
        self.figures = {}

    def step(self, name, value):
        self.steps[name] = value

    def puts(self):
        for c in CLASSES:
            self.step(f"PUT {c}", answer(lambda: self.s3.put_object(
                Bucket=BUCKET, Key=c, Body=c.encode() * 1000, StorageClass=c))[1])
        self.step("PUT an unknown storage class", answer(lambda: self.s3.put_object(
            Bucket=BUCKET, Key="unknown", Body=b"x", StorageClass="NOT_A_CLASS"))[1])

    def reads(self, when):
        for c in CLASSES:
            self.step(f"HEAD {c} {when}", answer(lambda: self.s3.head_object(Bucket=BUCKET, Key=c))[1])
            r, t = answer(lambda: self.s3.get_object(Bucket=BUCKET, Key=c))
            same = body_sha(r) == hashlib.sha256(c.encode() * 1000).hexdigest() if r else None
            self.step(f"GET {c} {when}", t + (same,))

    def restores(self, when):
        for c in CLASSES:
            self.step(f"RestoreObject {c} {when}", answer(lambda: self.s3.restore_object(
                Bucket=BUCKET, Key=c, RestoreRequest=RESTORE))[1])

    def wait_restored(self):
        """Polls HEAD until every archived object's restore has ended."""
        t0, polls = time.monotonic(), 0
        while time.monotonic() - t0 < self.a.restore_timeout:
            polls += 1
            forms = [answer(lambda: self.s3.head_object(Bucket=BUCKET, Key=c))[1][3] for c in ARCHIVED]
            if all(f == "ended, expiry-date" for f in forms):
                break
            time.sleep(0.5)
        self.figures.update(restore_seconds=round(time.monotonic() - t0, 1), restore_polls=polls)

    def errors(self):
        self.s3.put_object(Bucket=BUCKET, Key="no-days", Body=b"cold", StorageClass="GLACIER")
        self.step("RestoreObject without Days", answer(lambda: self.s3.restore_object(
            Bucket=BUCKET, Key="no-days", RestoreRequest={"GlacierJobParameters": {"Tier": "Standard"}}))[1])
        self.s3.delete_object(Bucket=BUCKET, Key="no-days")
        self.step("RestoreObject of a missing key", answer(lambda: self.s3.restore_object(
            Bucket=BUCKET, Key="missing", RestoreRequest=RESTORE))[1])

    def deletes(self):
        for c in CLASSES:
            self.step(f"DELETE {c}", answer(lambda: self.s3.delete_object(Bucket=BUCKET, Key=c))[1])
            self.step(f"HEAD {c} deleted", answer(lambda: self.s3.head_object(Bucket=BUCKET, Key=c))[1])
        self.step("list once deleted", listing(self.s3))

    def walk(self, expire=None):
        """Every step; `expire` moves the endpoint's clock past the expiry
        (tapeloom's restart), when it can be moved."""
        self.puts()
        self.step("list after the PUTs", listing(self.s3))
        self.reads("not restored")
        if self.a.archive:
            self.errors()
            self.restores("to start")
            self.restores("while it runs")
            for c in CLASSES:
                self.step(f"HEAD {c} while it runs",
                          answer(lambda: self.s3.head_object(Bucket=BUCKET, Key=c))[1])
            self.step("list while it runs", listing(self.s3))
            self.wait_restored()
            self.reads("restored")
            self.step("list restored", listing(self.s3))
            self.restores("once restored")
            if expire is not None:
                self.s3 = expire()
                self.reads("past the expiry")
                self.step("list past the expiry", listing(self.s3))
        self.deletes()


# Steps whose answer moto cannot give, with the answer of Amazon S3 that
# tapeloom's must equal instead, and why.
def aws_answers():
    out = {}
    for c in ARCHIVED:
        out[f"RestoreObject {c} while it runs"] = (
            (409, "RestoreAlreadyInProgress", None, None),
            "moto ends a restore at once and never answers RestoreAlreadyInProgress")
        out[f"HEAD {c} while it runs"] = (
            (200, None, c, "ongoing"), "moto ends a restore at once")
        out[f"HEAD {c} past the expiry"] = (
            (200, None, c, None), "moto's clock cannot be moved past an expiry")
        out[f"GET {c} past the expiry"] = (
            (403, "InvalidObjectState", c, None, None), "moto's clock cannot be moved past an expiry")
    out["HEAD STANDARD past the expiry"] = ((200, None, None, None), "moto's clock cannot be moved")
    out["GET STANDARD past the expiry"] = ((200, None, None, None, True), "moto's clock cannot be moved")
    # A listing is in the order of its keys, each object's key its class.
    rows = lambda forms: (200, None, sorted((c, c, f) for c, f in zip(CLASSES, forms)))  # noqa: E731
    out["list while it runs"] = (rows([None, "in progress", "in progress"]),
                                 "moto 5 gives no RestoreStatus in listings")
    out["list restored"] = (rows([None, "ended, expiry", "ended, expiry"]),
                            "moto 5 gives no RestoreStatus in listings")
    out["list past the expiry"] = (rows([None, None, None]), "moto's clock cannot be moved")
    out["RestoreObject without Days"] = (
        (400, "MalformedXML", None, None),
        "moto 5 answers 202 to a RestoreRequest without Days and restores nothing")
    return out


def normal(v):
    """A tuple as JSON gives it back: lists for tuples."""
    return json.loads(json.dumps(v))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client(url):
    return boto3.client("s3", endpoint_url=url, aws_access_key_id=client.ak,
                        aws_secret_access_key=client.sk, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


class Moto:
    """moto's server mode on a free port of 127.0.0.1."""

    def __init__(self, work):
        self.port = free_port()
        self.log = open(os.path.join(work, "moto.log"), "w")
        self.p = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                                   str(self.port)], stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"
        until = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.p.poll() is not None or time.monotonic() > until:
                    raise RuntimeError(f"moto's server did not start: see {self.log.name}")
                time.sleep(0.2)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(timeout=30)
        self.log.close()


class Tapeloom:
    """tapeloom's server with the S3 front end over plain HTTP on 127.0.0.1."""

    def __init__(self, a, work):
        self.a = a
        self.home = os.path.join(work, "home")
        self.log = os.path.join(work, "server.log")
        scale = a.capacity / 18e12
        tl(a, self.home, "library", "create", "--drives", "1", "--slots", "4", "--capacity",
           str(a.capacity), "--model", "lto9", "--clock", "virtual", "--scale", repr(scale))
        batch = ["--batch-age", str(a.batch_age)] if a.archive else []
        tl(a, self.home, "s3", "bucket", "create", BUCKET, *batch)
        k = tl(a, self.home, "s3", "key", "add", "states")
        self.key = (k["access_key"], k["secret"])
        self.p = None
        self.start()

    def start(self, now=None):
        args = [self.a.bin, "--home", self.home, "server", "--listen", "127.0.0.1:0",
                "--s3-listen", "127.0.0.1:0", "--s3-plain"]
        if self.a.archive:
            args += ["--s3-standard-window", str(self.a.standard_window),
                     "--s3-bulk-window", str(self.a.bulk_window)]
        env = dict(os.environ)
        if now is not None:
            env.update(TAPELOOM_NOW=now, TAPELOOM_CLOCK_SPEED="1")
        err = open(self.log, "a")
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        err.close()
        lines = [self.p.stdout.readline().strip() for _ in range(3)]
        if not lines[2].startswith("S3 on "):
            self.stop()
            raise RuntimeError(f"tapeloom's server did not start ({lines}): see {self.log}")
        self.url = lines[2].removeprefix("S3 on ")

    def past_expiry(self, s3):
        """Starts the server again with its clock an hour past the latest
        expiry HEAD shows; a new client for it."""
        latest = 0.0
        for c in ARCHIVED:
            m = RESTORED.match(s3.head_object(Bucket=BUCKET, Key=c).get("Restore", ""))
            if m:
                latest = max(latest, email.utils.parsedate_to_datetime(m.group(1)).timestamp())
        if not latest:
            raise RuntimeError("no restored object shows an expiry to move the clock past")
        now = datetime.datetime.fromtimestamp(latest + 3600, datetime.timezone.utc)
        self.stop()
        self.start(now.strftime("%Y-%m-%dT%H:%M:%SZ"))
        log(f"tapeloom: started again with its clock at {now.isoformat()}")
        return client(self.url)

    def stop(self):
        if self.p is not None and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def tl(a, home, *args):
    r = subprocess.run([a.bin, "--home", home, "--json", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tapeloom {' '.join(args)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def compare(ours, theirs):
    """Every step of either walk: its row, and the rows that differ."""
    gaps = aws_answers()
    rows, differ = [], []
    for name in list(dict.fromkeys(list(ours.steps) + list(theirs.steps))):
        t, m = normal(ours.steps.get(name)), normal(theirs.steps.get(name))
        row = {"step": name, "tapeloom": t, "moto": m}
        if name in gaps:
            want, why = gaps[name]
            row.update(against="Amazon S3", expected=normal(want), why=why)
            row["same"] = t == row["expected"]
        else:
            row["against"] = "moto"
            row["same"] = t == m and t is not None
        rows.append(row)
        if not row["same"]:
            differ.append(row)
    return rows, differ


def table(differ):
    """The differences as a table for people."""
    if not differ:
        return "differences: none"
    w = max(len(r["step"]) for r in differ)
    lines = [f"{'step':<{w}}  against    tapeloom  /  other"]
    for r in differ:
        other = r.get("expected") if r["against"] == "Amazon S3" else r["moto"]
        lines.append(f"{r['step']:<{w}}  {r['against']:<9}  {json.dumps(r['tapeloom'])}  /  "
                     f"{json.dumps(other)}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default=None, help="a folder for the home and logs (emptied first)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--no-archive", dest="archive", action="store_false",
                    help="leave out every step that needs archiving or RestoreObject")
    ap.add_argument("--capacity", type=int, default=1 << 30, help="bytes per cartridge (default 1 GiB)")
    ap.add_argument("--batch-age", type=int, default=2, help="seconds (default 2)")
    ap.add_argument("--standard-window", type=int, default=3,
                    help="seconds Standard restores gather (default 3: long enough to ask again)")
    ap.add_argument("--bulk-window", type=int, default=3, help="seconds (default 3)")
    ap.add_argument("--restore-timeout", type=int, default=600, help="seconds a restore may take")
    a = ap.parse_args()
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"{a.bin} is not an executable (cargo build --release -p tapeloom "
                 f"--features tapeloom/test-hooks)")
    try:
        import moto
    except ImportError:
        sys.exit(f"{sys.executable} has no moto: run this with target/s3-venv/bin/python "
                 f"(scripts/test.sh installs moto[server] there)")
    work = a.work or os.path.join(default_work_parent(), "tapeloom-s3-moto")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    mo = Moto(work)
    try:
        client.ak, client.sk = "testing", "testing"
        theirs = Walk("moto", lambda: client(mo.url), a)
        theirs.s3.create_bucket(Bucket=BUCKET)
        log(f"moto {moto.__version__} on {mo.url}")
        theirs.walk()
    finally:
        mo.stop()
    tape = Tapeloom(a, work)
    try:
        client.ak, client.sk = tape.key
        ours = Walk("tapeloom", lambda: client(tape.url), a)
        log(f"tapeloom on {tape.url}")
        ours.walk(expire=lambda: tape.past_expiry(ours.s3))
    finally:
        tape.stop()

    rows, differ = compare(ours, theirs)
    print(table(differ), file=sys.stderr)
    skipped = [] if a.archive else ["every RestoreObject step and the expiry: --no-archive"]
    doc = {"bench": "s3_moto", "archive": a.archive,
           "versions": {"moto": moto.__version__, "boto3": boto3.__version__},
           "compared": len(rows), "against_moto": sum(1 for r in rows if r["against"] == "moto"),
           "against_amazon_s3": sum(1 for r in rows if r["against"] == "Amazon S3"),
           "differences": differ, "tapeloom": ours.figures, "skipped": skipped, "steps": rows,
           "pass": not differ}
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(doc, indent=1))
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        sys.exit(f"s3_moto.py: {e}")
