#!/usr/bin/env python3
"""Walks the S3 front end with boto3 and aws-cli as their users would, and
checks every answer: buckets, objects of each storage class, a restore's
status in both listings (ListObjects and ListObjectsV2), listings, ranges
and conditions, multipart uploads with the checksums that botocore sends by
default since 1.36, copies, deletes, and bad input (a wrong secret, an unsigned
request, a presigned URL of more than seven days, a bad checksum, keys S3 or
tapeloom refuse).

Usage: walk.py ENDPOINT ACCESS_KEY SECRET LIMITED_ACCESS_KEY LIMITED_SECRET
[CA_BUNDLE]. The limited key may use only the bucket `limited`, which must
exist. It prints one JSON document: {"checks": N, "failed": [...]} and exits 1
when a check failed.
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

endpoint, ak, sk, lak, lsk = sys.argv[1:6]
ca = sys.argv[6] if len(sys.argv) > 6 else None
checks, failed = 0, []


def check(what, ok, detail=""):
    global checks
    checks += 1
    if not ok:
        failed.append(f"{what}: {detail}")


def client(key=ak, secret=sk):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name="us-east-1",
        verify=ca if ca else True,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def code_of(f):
    """The error code and HTTP status a call fails with; None when it works."""
    try:
        f()
    except ClientError as e:
        return e.response["Error"].get("Code"), e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None


s3 = client()
B = "walk"

# Buckets.
s3.create_bucket(Bucket=B)
names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
check("list_buckets shows the new bucket", B in names and "limited" in names, names)
check("head_bucket of a missing bucket", code_of(lambda: s3.head_bucket(Bucket="nope")) == ("404", 404))
check("create_bucket with a bad name", code_of(lambda: s3.create_bucket(Bucket="Bad_Name"))[0] == "InvalidBucketName")
check("create_bucket again", code_of(lambda: s3.create_bucket(Bucket=B))[0] == "BucketAlreadyOwnedByYou")

# A STANDARD object with metadata.
body = os.urandom(100_000)
put = s3.put_object(Bucket=B, Key="docs/a.bin", Body=body, ContentType="application/x-test",
                    Metadata={"colour": "blue"})
check("put_object's ETag is the MD5", put["ETag"].strip('"') == hashlib.md5(body).hexdigest(), put["ETag"])
got = s3.get_object(Bucket=B, Key="docs/a.bin")
check("get_object gives the bytes back", got["Body"].read() == body)
check("get_object gives the metadata back", got["Metadata"] == {"colour": "blue"} and got["ContentType"] == "application/x-test",
      (got["Metadata"], got.get("ContentType")))
head = s3.head_object(Bucket=B, Key="docs/a.bin", ChecksumMode="ENABLED")
check("head_object: size, no storage class for STANDARD, a checksum", head["ContentLength"] == len(body)
      and "StorageClass" not in head and any(k.startswith("Checksum") for k in head), head)
r = s3.get_object(Bucket=B, Key="docs/a.bin", Range="bytes=10-19")
check("a range", r["Body"].read() == body[10:20] and r["ContentRange"] == f"bytes 10-19/{len(body)}", r.get("ContentRange"))
check("a range past the end", code_of(lambda: s3.get_object(Bucket=B, Key="docs/a.bin", Range="bytes=200000-"))[0] == "InvalidRange")
check("If-None-Match of its ETag", code_of(lambda: s3.get_object(Bucket=B, Key="docs/a.bin", IfNoneMatch=put["ETag"]))[1] == 304)
check("If-Match of another ETag", code_of(lambda: s3.get_object(Bucket=B, Key="docs/a.bin", IfMatch='"0"'))[0] == "PreconditionFailed")
check("a missing key", code_of(lambda: s3.get_object(Bucket=B, Key="nope"))[0] == "NoSuchKey")

# A GLACIER object: HEAD answers, GET needs a restore.
s3.put_object(Bucket=B, Key="cold/x", Body=b"cold data", StorageClass="GLACIER")
h = s3.head_object(Bucket=B, Key="cold/x")
check("head_object of a GLACIER object", h.get("StorageClass") == "GLACIER" and "Restore" not in h, h)
check("get_object of a GLACIER object not restored", code_of(lambda: s3.get_object(Bucket=B, Key="cold/x")) == ("InvalidObjectState", 403))
try:
    s3.get_object(Bucket=B, Key="cold/x")
except ClientError as e:
    check("InvalidObjectState names the storage class", e.response["Error"].get("StorageClass") == "GLACIER", e.response["Error"])
# A restore asked: both listings give its RestoreStatus when asked for it
# (ongoing or ended, whichever it is by then).
r = s3.restore_object(Bucket=B, Key="cold/x", RestoreRequest={"Days": 1, "GlacierJobParameters": {"Tier": "Expedited"}})
check("restore_object of a GLACIER object starts a restore", r["ResponseMetadata"]["HTTPStatusCode"] == 202, r["ResponseMetadata"])
for name, lister in (("list_objects", s3.list_objects), ("list_objects_v2", s3.list_objects_v2)):
    l = lister(Bucket=B, Prefix="cold/", OptionalObjectAttributes=["RestoreStatus"])
    entry = {o["Key"]: o for o in l.get("Contents", [])}.get("cold/x", {})
    check(f"{name} with RestoreStatus gives the restore's status", "IsRestoreInProgress" in entry.get("RestoreStatus", {}), entry)
check("an unknown storage class", code_of(lambda: s3.put_object(Bucket=B, Key="k", Body=b"", StorageClass="ONEZONE_IA"))[0] == "InvalidStorageClass")

# Listings: prefixes, delimiters, pages.
for k in ["docs/b.txt", "docs/sub/c.txt", "e.txt", "f.txt"]:
    s3.put_object(Bucket=B, Key=k, Body=k.encode())
l = s3.list_objects_v2(Bucket=B, Delimiter="/")
check("list_objects_v2 with a delimiter", [c["Prefix"] for c in l.get("CommonPrefixes", [])] == ["cold/", "docs/"]
      and [o["Key"] for o in l["Contents"]] == ["e.txt", "f.txt"], l)
keys, token, pages = [], None, 0
while True:
    kw = {"ContinuationToken": token} if token else {}
    p = s3.list_objects_v2(Bucket=B, MaxKeys=2, **kw)
    keys += [o["Key"] for o in p.get("Contents", [])]
    pages += 1
    if not p["IsTruncated"]:
        break
    token = p["NextContinuationToken"]
check("list_objects_v2 in pages of 2", keys == sorted(keys) and len(keys) == 6 and pages == 3, (keys, pages))
l = s3.list_objects_v2(Bucket=B, Prefix="docs/", Delimiter="/")
check("a prefix and a delimiter", [o["Key"] for o in l["Contents"]] == ["docs/a.bin", "docs/b.txt"]
      and [c["Prefix"] for c in l["CommonPrefixes"]] == ["docs/sub/"], l)
l = s3.list_objects_v2(Bucket=B, StartAfter="e.txt")
check("start-after", [o["Key"] for o in l["Contents"]] == ["f.txt"], l)
l1 = s3.list_objects(Bucket=B, Prefix="docs/")
check("list_objects (v1)", [o["Key"] for o in l1["Contents"]] == ["docs/a.bin", "docs/b.txt", "docs/sub/c.txt"], l1)

# Multipart, with the CRC32 checksums botocore sends.
mp = s3.create_multipart_upload(Bucket=B, Key="big", ChecksumAlgorithm="CRC32")
p1, p2 = os.urandom(5 << 20), os.urandom(1 << 20)
e1 = s3.upload_part(Bucket=B, Key="big", UploadId=mp["UploadId"], PartNumber=1, Body=p1, ChecksumAlgorithm="CRC32")
e2 = s3.upload_part(Bucket=B, Key="big", UploadId=mp["UploadId"], PartNumber=2, Body=p2, ChecksumAlgorithm="CRC32")
parts = s3.list_parts(Bucket=B, Key="big", UploadId=mp["UploadId"])["Parts"]
check("list_parts", [p["PartNumber"] for p in parts] == [1, 2], parts)
ups = s3.list_multipart_uploads(Bucket=B).get("Uploads", [])
check("list_multipart_uploads", [u["Key"] for u in ups] == ["big"], ups)
done = s3.complete_multipart_upload(Bucket=B, Key="big", UploadId=mp["UploadId"], MultipartUpload={"Parts": [
    {"PartNumber": 1, "ETag": e1["ETag"], "ChecksumCRC32": e1["ChecksumCRC32"]},
    {"PartNumber": 2, "ETag": e2["ETag"], "ChecksumCRC32": e2["ChecksumCRC32"]}]})
want = hashlib.md5(hashlib.md5(p1).digest() + hashlib.md5(p2).digest()).hexdigest() + "-2"
check("a multipart ETag as AWS forms it", done["ETag"].strip('"') == want, done["ETag"])
check("the multipart object reads back", s3.get_object(Bucket=B, Key="big")["Body"].read() == p1 + p2)
g2 = s3.get_object(Bucket=B, Key="big", PartNumber=2)
check("GET of part 2 gives its bytes and the parts' count",
      g2["Body"].read() == p2 and g2.get("PartsCount") == 2 and g2["ResponseMetadata"]["HTTPStatusCode"] == 206,
      {k: g2.get(k) for k in ("PartsCount", "ContentRange")})
check("HEAD of part 1 gives its length", s3.head_object(Bucket=B, Key="big", PartNumber=1)["ContentLength"] == len(p1))
check("GET of a part the object does not have",
      code_of(lambda: s3.get_object(Bucket=B, Key="big", PartNumber=3)) == ("InvalidPartNumber", 416))
# UploadPartCopy: a part copied from a range of an object, another whole.
mp = s3.create_multipart_upload(Bucket=B, Key="copied", ChecksumAlgorithm="CRC32")
c1 = s3.upload_part_copy(Bucket=B, Key="copied", UploadId=mp["UploadId"], PartNumber=1,
                         CopySource={"Bucket": B, "Key": "big"}, CopySourceRange=f"bytes=0-{(5 << 20) - 1}")
c2 = s3.upload_part_copy(Bucket=B, Key="copied", UploadId=mp["UploadId"], PartNumber=2,
                         CopySource={"Bucket": B, "Key": "big"})
check("upload_part_copy gives the part's MD5 and CRC32",
      c1["CopyPartResult"]["ETag"].strip('"') == hashlib.md5(p1).hexdigest()
      and c1["CopyPartResult"].get("ChecksumCRC32") is not None, c1["CopyPartResult"])
s3.complete_multipart_upload(Bucket=B, Key="copied", UploadId=mp["UploadId"], MultipartUpload={"Parts": [
    {"PartNumber": 1, "ETag": c1["CopyPartResult"]["ETag"], "ChecksumCRC32": c1["CopyPartResult"]["ChecksumCRC32"]},
    {"PartNumber": 2, "ETag": c2["CopyPartResult"]["ETag"], "ChecksumCRC32": c2["CopyPartResult"]["ChecksumCRC32"]}]})
check("an object of copied parts reads back",
      s3.get_object(Bucket=B, Key="copied")["Body"].read() == p1 + p1 + p2)
check("a copy range past the source's end", code_of(lambda: s3.upload_part_copy(
    Bucket=B, Key="copied", UploadId="x", PartNumber=1, CopySource={"Bucket": B, "Key": "big"},
    CopySourceRange="bytes=0-99999999"))[0] in ("InvalidArgument", "NoSuchUpload"))
mp = s3.create_multipart_upload(Bucket=B, Key="small-parts")
e1 = s3.upload_part(Bucket=B, Key="small-parts", UploadId=mp["UploadId"], PartNumber=1, Body=b"x" * 1000)
e2 = s3.upload_part(Bucket=B, Key="small-parts", UploadId=mp["UploadId"], PartNumber=2, Body=b"y")
check("a part under 5 MiB that is not last", code_of(lambda: s3.complete_multipart_upload(
    Bucket=B, Key="small-parts", UploadId=mp["UploadId"], MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": e1["ETag"]}, {"PartNumber": 2, "ETag": e2["ETag"]}]}))[0] == "EntityTooSmall")
check("part number 10,001", code_of(lambda: s3.upload_part(Bucket=B, Key="small-parts", UploadId=mp["UploadId"],
                                                            PartNumber=10001, Body=b"z"))[0] in ("InvalidArgument",))
s3.abort_multipart_upload(Bucket=B, Key="small-parts", UploadId=mp["UploadId"])
check("an aborted upload is gone", code_of(lambda: s3.list_parts(Bucket=B, Key="small-parts", UploadId=mp["UploadId"]))[0] == "NoSuchUpload")

# Copies and deletes.
s3.copy_object(Bucket=B, Key="copy.bin", CopySource={"Bucket": B, "Key": "docs/a.bin"})
check("copy_object", s3.get_object(Bucket=B, Key="copy.bin")["Body"].read() == body)
check("delete_bucket of a bucket with objects", code_of(lambda: s3.delete_bucket(Bucket=B))[0] == "BucketNotEmpty")
d = s3.delete_objects(Bucket=B, Delete={"Objects": [{"Key": "e.txt"}, {"Key": "f.txt"}, {"Key": "never"}]})
check("delete_objects", sorted(x["Key"] for x in d["Deleted"]) == ["e.txt", "f.txt", "never"], d)
check("a deleted key is gone", code_of(lambda: s3.head_object(Bucket=B, Key="e.txt"))[1] == 404)

# Bad input: each refused with S3's code, nothing stored.
check("a CRC32 that does not match", code_of(lambda: s3.put_object(Bucket=B, Key="bad", Body=b"abc", ChecksumCRC32="AAAAAA=="))[0] == "BadDigest")
check("a key of 1,025 bytes", code_of(lambda: s3.put_object(Bucket=B, Key="k" * 1025, Body=b""))[0] == "KeyTooLongError")
check("a key with ../", code_of(lambda: s3.put_object(Bucket=B, Key="a/../b", Body=b""))[0] == "InvalidArgument")
check("a key with a NUL", code_of(lambda: s3.put_object(Bucket=B, Key="a\x00b", Body=b""))[0] in ("InvalidArgument", "InvalidURI"))
check("a wrong secret", code_of(lambda: client(ak, "x" * 40).list_buckets())[0] == "SignatureDoesNotMatch")
check("an unknown access key", code_of(lambda: client("TLNOPE", sk).list_buckets())[0] == "InvalidAccessKeyId")
url = s3.generate_presigned_url("get_object", Params={"Bucket": B, "Key": "docs/b.txt"}, ExpiresIn=3600)


def fetch(u):
    ctx = None
    if ca:
        import ssl
        ctx = ssl.create_default_context(cafile=ca)
    try:
        with urllib.request.urlopen(u, context=ctx) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


status, data = fetch(url)
check("a presigned URL", status == 200 and data == b"docs/b.txt", (status, data[:200]))
status, data = fetch(s3.generate_presigned_url("get_object", Params={"Bucket": B, "Key": "docs/b.txt"}, ExpiresIn=8 * 86400))
check("a presigned URL of eight days", status == 400 and b"AuthorizationQueryParametersError" in data, (status, data[:200]))
status, data = fetch(f"{endpoint}/{B}/docs/b.txt")
check("an unsigned request", status == 403 and b"AccessDenied" in data, (status, data[:200]))
listed = [o["Key"] for o in s3.list_objects_v2(Bucket=B).get("Contents", [])]
check("nothing refused was stored", not any(k in listed for k in ["bad", "k" * 1025, "a/../b"]), listed)

# A key made for one bucket sees only that one.
lim = client(lak, lsk)
check("a limited key lists only its bucket", [b["Name"] for b in lim.list_buckets()["Buckets"]] == ["limited"])
check("a limited key on another bucket", code_of(lambda: lim.list_objects_v2(Bucket=B))[0] == "AccessDenied")
check("a limited key makes no bucket", code_of(lambda: lim.create_bucket(Bucket="other"))[0] == "AccessDenied")
lim.put_object(Bucket="limited", Key="mine", Body=b"ok")
check("a limited key uses its bucket", lim.get_object(Bucket="limited", Key="mine")["Body"].read() == b"ok")
check("a limited key copies nothing out of another bucket", code_of(lambda: lim.copy_object(
    Bucket="limited", Key="stolen", CopySource={"Bucket": B, "Key": "big"}))[0] == "AccessDenied")

# aws-cli as its users run it: a multipart cp, a sync twice, a presign, rm --recursive.
env = dict(os.environ, AWS_ACCESS_KEY_ID=ak, AWS_SECRET_ACCESS_KEY=sk, AWS_DEFAULT_REGION="us-east-1")
if ca:
    env["AWS_CA_BUNDLE"] = ca
aws = [sys.executable, "-m", "awscli", "--endpoint-url", endpoint]


def run(*args):
    r = subprocess.run(aws + list(args), env=env, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


with tempfile.TemporaryDirectory() as d:
    big = os.path.join(d, "big")
    with open(big, "wb") as f:
        f.write(os.urandom(20 << 20))
    rc, out, err = run("s3", "cp", "--only-show-errors", big, f"s3://{B}/cli/big")
    check("aws s3 cp (multipart)", rc == 0, err)
    rc, out, err = run("s3", "cp", "--only-show-errors", f"s3://{B}/cli/big", big + ".back")
    same = rc == 0 and open(big, "rb").read() == open(big + ".back", "rb").read()
    check("aws s3 cp back, identical", same, err)
    tree = os.path.join(d, "tree")
    for i in range(200):
        os.makedirs(os.path.join(tree, f"d{i % 7}"), exist_ok=True)
        with open(os.path.join(tree, f"d{i % 7}", f"f{i}"), "wb") as f:
            f.write(os.urandom(i * 10))
    rc, out, err = run("s3", "sync", "--no-progress", tree, f"s3://{B}/tree")
    check("aws s3 sync", rc == 0 and out.count("upload:") == 200, (rc, out[-300:], err[-300:]))
    rc, out, err = run("s3", "sync", "--no-progress", tree, f"s3://{B}/tree")
    check("aws s3 sync again copies nothing", rc == 0 and "upload:" not in out, (rc, out[-300:], err[-300:]))
    rc, out, err = run("s3", "presign", f"s3://{B}/docs/b.txt")
    status, data = fetch(out.strip())
    check("aws s3 presign", rc == 0 and status == 200 and data == b"docs/b.txt", (rc, status, err))
    rc, out, err = run("s3", "rm", "--recursive", "--only-show-errors", f"s3://{B}")
    check("aws s3 rm --recursive", rc == 0, err)
    left = s3.list_objects_v2(Bucket=B).get("KeyCount", -1)
    check("the bucket is empty after rm --recursive", left == 0, left)
# Virtual-hosted addressing, when the server was given --s3-domain (the
# environment's S3_DOMAIN): BUCKET.DOMAIN is looked up here as the address of
# the endpoint, as a DNS wildcard would give it.
domain = os.environ.get("S3_DOMAIN")
if domain:
    import socket
    import urllib.parse
    host = urllib.parse.urlsplit(endpoint).hostname
    real = socket.getaddrinfo

    def lookup(name, *rest, **kw):
        if isinstance(name, str) and name.endswith("." + domain):
            name = host
        return real(name, *rest, **kw)

    socket.getaddrinfo = lookup
    port = urllib.parse.urlsplit(endpoint).port
    vh = boto3.client("s3", endpoint_url=f"http://{domain}:{port}", aws_access_key_id=ak,
                      aws_secret_access_key=sk, region_name="us-east-1",
                      config=Config(s3={"addressing_style": "virtual"}, retries={"max_attempts": 1}))
    vh.put_object(Bucket=B, Key="vhost/a", Body=b"virtual")
    check("virtual-hosted PUT and GET",
          vh.get_object(Bucket=B, Key="vhost/a")["Body"].read() == b"virtual")
    check("virtual-hosted listing",
          [o["Key"] for o in vh.list_objects_v2(Bucket=B, Prefix="vhost/").get("Contents", [])] == ["vhost/a"])
    vh.delete_object(Bucket=B, Key="vhost/a")
    socket.getaddrinfo = real
s3.delete_bucket(Bucket=B)
check("delete_bucket of an empty bucket", B not in [b["Name"] for b in s3.list_buckets()["Buckets"]])

print(json.dumps({"checks": checks, "failed": failed}, indent=1))
sys.exit(1 if failed else 0)
