#!/usr/bin/env python3
"""The S3 front end on a site: two servers on one PostgreSQL catalog, each
with its own library, each serving S3 for every bucket. One JSON document on
stdout (progress on stderr); it exits 1 when a check failed.

Each home (a and b) names the catalog and its own name in `home.toml` and has
a virtual library of one drive with the LTO-9 model at the scale of
--capacity cartridges and the virtual clock, barcodes of its own (TA..., TB...).
The pool, the bucket (batches of --batch-age seconds) and the access key are
made once, in the shared catalog; b's home gets a copy of a's `s3-seal.key`,
as every server of a site must. Both servers serve S3 over TLS with their own
certificates; each client trusts the server it talks to.

  put     Through a: a GLACIER object of --size (boto3's multipart upload) and
          a STANDARD one of --small. A third object is uploaded in parts begun
          through a, its parts and its completion sent through b (b sends each
          request on to a, body and all, since the upload's parts are on a's
          disk).
  read    Through b: GET of the STANDARD object (its data is on a's stage: b
          sends the GET on to a) is identical by SHA-256, with a Range too;
          GET of the GLACIER object fails with InvalidObjectState as through a.
  tape    Once a has archived the GLACIER object and released its disk copy,
          RestoreObject through b answers 202, then 409 while it runs; the
          restore is read by a (its library holds the cartridge; a's log has
          the reading, b's none); HEAD through b then shows the restore's
          expiry, and GET through b gives the object back identical.
  delete  DELETE through b of the STANDARD object: it leaves the listing at
          once, and a removes its data file from its disk.
The document gives the GET rates through a and through b (sent on) of the
restored object, and `catalog check` of both homes.

The catalog is --catalog (a PostgreSQL URL) when given, else a PostgreSQL
server started here from Debian's package in the work folder and stopped at
the end.

  target/s3-venv/bin/python bench/s3_site.py
  target/s3-venv/bin/python bench/s3_site.py --size 16M
"""
import argparse, hashlib, json, os, re, shutil, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != HERE] + [HERE]
import boto3  # noqa: E402
from boto3.s3.transfer import TransferConfig  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

from engine import default_work_parent, log, parse_size, REPO  # noqa: E402
from s3_glacier import Checks, RESTORED, run, tl  # noqa: E402
from s3_order import stop, wait_for  # noqa: E402

BUCKET = "site"


def start(a, home, log_path):
    """The server of `home` with S3 over TLS: its process and S3 URL."""
    args = [a.bin, "--home", home, "server", "--listen", "127.0.0.1:0", "--s3-listen",
            "127.0.0.1:0", "--s3-standard-window", "1", "--s3-bulk-window", "1"]
    err = open(log_path, "a")
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True,
                         env=dict(os.environ, RUST_LOG="info"))
    lines = [p.stdout.readline().strip() for _ in range(3)]
    if not lines[2].startswith("S3 on "):
        p.kill()
        raise RuntimeError(f"the server did not start ({lines}): see {log_path}")
    # The certificate names localhost, not the address.
    return p, lines[2].removeprefix("S3 on ").replace("https://127.0.0.1", "https://localhost")


def client(url, key, ca):
    return boto3.client("s3", endpoint_url=url, aws_access_key_id=key["access_key"],
                        aws_secret_access_key=key["secret"], region_name="us-east-1",
                        verify=ca, config=Config(s3={"addressing_style": "path"}))


def log_has(path, what):
    with open(path) as f:
        return sum(1 for line in f if what in line)


def refused(f):
    """The error code and status of a call; None when it succeeds."""
    try:
        r = f()
        if "Body" in r:
            r["Body"].read()
    except ClientError as e:
        return e.response["Error"].get("Code"), e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None


def timed_get(s3, key):
    """(SHA-256, MB/s) of a GET of `key`."""
    t0 = time.monotonic()
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    secs = time.monotonic() - t0
    return hashlib.sha256(body).hexdigest(), round(len(body) / 1e6 / max(secs, 1e-6), 1)


class Postgres:
    """PostgreSQL from Debian's package in `folder`, on 127.0.0.1."""

    def __init__(self, folder):
        from catalog_scale import Postgres as Pg
        self.pg = Pg(folder)

    def url(self):
        return self.pg.database("s3site")

    def stop(self):
        self.pg.stop()


def make_home(a, work, url, name, prefix):
    home = os.path.join(work, name)
    os.makedirs(home)
    with open(os.path.join(home, "home.toml"), "w") as f:
        f.write(f'name = "{name}"\ncatalog = "{url}"\n')
    scale = a.capacity / 18e12
    subprocess.run([a.bin, "--home", home, "library", "create", "--drives", "1", "--slots", "4",
                    "--capacity", str(a.capacity), "--model", "lto9", "--clock", "virtual",
                    "--scale", repr(scale), "--prefix", prefix], check=True, capture_output=True)
    return home


def stage_files(home):
    """The data files of the S3 stage of `home`."""
    root = os.path.join(home, "s3")
    out = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in ("scratch", "batches")]
        out.update(os.path.join(d, f) for f in files)
    return out


def flow(a, c, work, homes, key, figures):
    rng = __import__("random").Random(a.seed)
    big, small, parted = rng.randbytes(a.size), rng.randbytes(a.small), rng.randbytes(a.size)
    digest = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731
    logs = {n: os.path.join(work, f"server-{n}.log") for n in homes}
    procs, urls = {}, {}
    try:
        for n, h in homes.items():
            procs[n], urls[n] = start(a, h, logs[n])
        cas = {n: os.path.join(h, "server", "cert.pem") for n, h in homes.items()}
        s3a, s3b = (client(urls[n], key, cas[n]) for n in ("a", "b"))
        log(f"S3 on {urls['a']} (a) and {urls['b']} (b)")

        # put: through a; an upload begun through a and carried on through b.
        big_path = os.path.join(work, "big")
        with open(big_path, "wb") as f:
            f.write(big)
        multipart = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20)
        s3a.upload_file(big_path, BUCKET, "big", ExtraArgs={"StorageClass": "GLACIER"},
                        Config=multipart)
        s3a.put_object(Bucket=BUCKET, Key="small", Body=small)
        up = s3a.create_multipart_upload(Bucket=BUCKET, Key="parted")["UploadId"]
        step = 5 << 20
        parts = []
        for i, off in enumerate(range(0, len(parted), step), start=1):
            r = s3b.upload_part(Bucket=BUCKET, Key="parted", UploadId=up, PartNumber=i,
                                Body=parted[off:off + step])
            parts.append({"ETag": r["ETag"], "PartNumber": i})
        listed = s3b.list_parts(Bucket=BUCKET, Key="parted", UploadId=up)["Parts"]
        c.check("put: ListParts through b lists the parts sent through b", len(listed) == len(parts),
                listed)
        s3b.complete_multipart_upload(Bucket=BUCKET, Key="parted", UploadId=up,
                                      MultipartUpload={"Parts": parts})
        got = s3b.get_object(Bucket=BUCKET, Key="parted")["Body"].read()
        c.check("put: the upload carried on through b reads back identical through b",
                digest(got) == digest(parted))
        c.check("put: b sent the upload's parts on to a: b's disk holds no data file",
                len(parts) >= 2 and not stage_files(homes["b"]), sorted(stage_files(homes["b"])))

        # read: through b.
        sha, _ = timed_get(s3b, "small")
        c.check("read: a STANDARD object put through a reads identical through b",
                sha == digest(small))
        r = s3b.get_object(Bucket=BUCKET, Key="small", Range="bytes=100-199")
        c.check("read: a Range GET through b gives those bytes",
                r["Body"].read() == small[100:200] and r["ResponseMetadata"]["HTTPStatusCode"] == 206)
        c.check("read: a GLACIER object not restored is InvalidObjectState through b",
                refused(lambda: s3b.get_object(Bucket=BUCKET, Key="big"))
                == ("InvalidObjectState", 403))

        # tape: a archives and releases; the restore asked through b is read by a.
        figures["archive_seconds"] = wait_for(
            "the GLACIER objects archived by a and their disk copies released",
            lambda: log_has(logs["a"], "S3 disk copies released") > 0, a.timeout)
        jobs_a = [j for j in tl(a, homes["a"], "jobs")["jobs"] if j["name"] == f"s3-{BUCKET}"]
        c.check("tape: the bucket's jobs are on a's cartridges",
                jobs_a and all(v.startswith("TA") for j in jobs_a for v in j["volumes"]),
                [(j["job_id"], j["volumes"]) for j in jobs_a])
        c.check("tape: b archived nothing", log_has(logs["b"], "S3 objects archived") == 0)
        rr = {"Days": 1, "GlacierJobParameters": {"Tier": "Standard"}}
        first = s3b.restore_object(Bucket=BUCKET, Key="big", RestoreRequest=rr)
        c.check("tape: RestoreObject through b answers 202",
                first["ResponseMetadata"]["HTTPStatusCode"] == 202, first["ResponseMetadata"])
        again = refused(lambda: s3b.restore_object(Bucket=BUCKET, Key="big", RestoreRequest=rr))
        c.check("tape: again while it runs, 409 RestoreAlreadyInProgress",
                again == ("RestoreAlreadyInProgress", 409), again)
        figures["restore_seconds"] = wait_for(
            "the restore asked through b ends",
            lambda: RESTORED.match(s3b.head_object(Bucket=BUCKET, Key="big").get("Restore", "")),
            a.timeout)
        c.check("tape: a read the restore", log_has(logs["a"], "S3 restores: one reading") >= 1)
        c.check("tape: b read no restore", log_has(logs["b"], "S3 restores: one reading") == 0)
        sha_b, rate_b = timed_get(s3b, "big")
        sha_a, rate_a = timed_get(s3a, "big")
        c.check("tape: the restored object reads identical through b", sha_b == digest(big))
        c.check("tape: and through a", sha_a == digest(big))
        figures.update(get_mb_s_through_a=rate_a, get_mb_s_through_b=rate_b,
                       through_b_over_a=round(rate_b / rate_a, 2) if rate_a else None)

        # delete: through b; a removes the data file.
        before = stage_files(homes["a"])
        s3b.delete_object(Bucket=BUCKET, Key="small")
        keys = [o["Key"] for o in s3a.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
        c.check("delete: the object leaves the listing at once", "small" not in keys, keys)
        figures["delete_seconds"] = wait_for(
            "a removes the data file of the object deleted through b",
            lambda: len(before - stage_files(homes["a"])) >= 1, 60)
    finally:
        for p in procs.values():
            stop(p)
    for n, h in homes.items():
        rc, text, err, _ = run([a.bin, "--home", h, "--json", "catalog", "check"])
        ok = rc == 0 and json.loads(text or "{}").get("ok") is True
        c.check(f"`catalog check` of {n} says ok", ok, (rc, text[-300:], err[-300:]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(REPO, "target/release/tapeloom"))
    p.add_argument("--work", help="work folder (default: a new one under /tmp or /dev/shm)")
    p.add_argument("--catalog", help="a PostgreSQL URL (default: a server started here)")
    p.add_argument("--size", type=parse_size, default=parse_size("32M"))
    p.add_argument("--small", type=parse_size, default=parse_size("256K"))
    p.add_argument("--capacity", type=parse_size, default=parse_size("4G"))
    p.add_argument("--batch-age", type=int, default=2)
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--seed", type=int, default=48)
    a = p.parse_args()
    a.work = a.work or os.path.join(default_work_parent(), f"s3-site-{os.getpid()}")
    os.makedirs(a.work)
    c, figures = Checks(), {}
    pg = None
    t0 = time.monotonic()
    try:
        url = a.catalog
        if not url:
            os.makedirs(os.path.join(a.work, "pg"))
            pg = Postgres(os.path.join(a.work, "pg"))
            url = pg.url()
        homes = {"a": make_home(a, a.work, url, "a", "TA"),
                 "b": make_home(a, a.work, url, "b", "TB")}
        tl(a, homes["a"], "pool", "create", "s3")
        tl(a, homes["a"], "s3", "bucket", "create", BUCKET, "--pool", "s3", "--batch-age",
           str(a.batch_age))
        key = tl(a, homes["a"], "s3", "key", "add", "site")
        shutil.copy(os.path.join(homes["a"], "s3-seal.key"), os.path.join(homes["b"], "s3-seal.key"))
        flow(a, c, a.work, homes, key, figures)
    except Exception as e:  # noqa: BLE001
        c.check("the run ended", False, repr(e))
    finally:
        if pg:
            pg.stop()
    doc = {"checks": c.count, "failed": c.failed, "figures": figures,
           "seconds": round(time.monotonic() - t0, 1), "size": a.size, "work": a.work}
    print(json.dumps(doc, indent=1))
    if not c.failed:
        shutil.rmtree(a.work, ignore_errors=True)
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
