#!/usr/bin/env python3
"""Bad input to the S3 front end, as one JSON document on stdout (progress on
stderr); it exits 1 when a check failed.

A home with a virtual library (the LTO-9 model, the virtual clock), an access
key and a bucket is served over HTTPS (`--s3-listen`, the server's certificate
as the clients' CA bundle). Each bad request below must be answered with S3's
error code and status, and store nothing:

  wrong_secret        a PUT signed with a wrong secret: 403 SignatureDoesNotMatch
  expired_presigned   a presigned GET whose X-Amz-Expires (1 s) has passed: 403
                      AccessDenied
  clock_skew          a PUT signed by hand 20 minutes in the past, and one 20
                      minutes ahead: 403 RequestTimeTooSkewed
  chunk_chain         a signed streaming body (STREAMING-AWS4-HMAC-SHA256-PAYLOAD)
                      whose second chunk's signature is chained to the seed's
                      signature instead of the first chunk's: 403
                      SignatureDoesNotMatch
  crc32_trailer       an unsigned streaming body with a trailer
                      (STREAMING-UNSIGNED-PAYLOAD-TRAILER) whose
                      x-amz-checksum-crc32 is not the body's: 400 BadDigest
  part_too_small      CompleteMultipartUpload of two parts of 1 MiB (the first is
                      not the last and under 5 MiB): 400 EntityTooSmall
  part_10001          UploadPart with part number 10,001: 400 InvalidArgument
  key_1025            a PUT of a key of 1,025 bytes: 400 KeyTooLongError
  key_dotdot          a PUT of the key `a/../b`: 400 InvalidArgument
  key_nul             a PUT of a key holding a NUL: 400 InvalidArgument

The requests made by hand (the skewed time, the streaming bodies) are signed by
this script's own SigV4 signer; each has a control, the same request made
right, which must be answered 200 and read back identical, so that a refusal is
the server's judgement of the fault and not of the signer. After the bad
requests, the bucket's listing must hold the controls and nothing else, no
multipart upload may be left but the one CompleteMultipartUpload refused (S3
keeps it; it is aborted and then gone), the server must still answer, and its
log must have no "panicked".

Run it with the Python of the test command's virtual environment, which has
boto3, against a binary built with `cargo build --release -p tapeloom
--features tapeloom/test-hooks`:

  target/s3-venv/bin/python bench/s3_bad.py
  target/s3-venv/bin/python bench/s3_bad.py --quick
"""
import argparse, base64, datetime, hashlib, hmac, json, os, re, select, shutil, socket, ssl
import sys, time, urllib.parse, zlib

# bench/copy.py would stand for the standard library's copy, which botocore
# imports: this folder is searched last.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != HERE] + [HERE]
import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402

from engine import default_work_parent, REPO  # noqa: E402
from s3_glacier import Checks, Pass, new_home  # noqa: E402

BUCKET = "bad"
REGION = "us-east-1"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def _hmac(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


class Signer:
    """AWS Signature Version 4 for S3, by hand: the time is the caller's, and
    the signatures of a streaming body's chunks are exposed."""

    def __init__(self, access_key, secret):
        self.ak, self.sk = access_key, secret

    def key(self, date):
        k = _hmac(("AWS4" + self.sk).encode(), date)
        for part in (REGION, "s3", "aws4_request"):
            k = _hmac(k, part)
        return k

    def sign(self, method, path, headers, payload, when):
        """Signs a request of `path` (already URI-encoded, no query) with
        `headers` (lower-case names) and the payload hash `payload` at `when`
        (a UTC datetime): the headers to send, and (the seed signature, the
        time stamp, the scope) for chunk signatures."""
        stamp = when.strftime("%Y%m%dT%H%M%SZ")
        date = stamp[:8]
        scope = f"{date}/{REGION}/s3/aws4_request"
        h = dict(headers, **{"x-amz-date": stamp, "x-amz-content-sha256": payload})
        names = sorted(h)
        canonical = "\n".join([method, path, "",
                               "".join(f"{n}:{str(h[n]).strip()}\n" for n in names),
                               ";".join(names), payload])
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        sig = hmac.new(self.key(date), to_sign.encode(), hashlib.sha256).hexdigest()
        h["authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.ak}/{scope}, "
                              f"SignedHeaders={';'.join(names)}, Signature={sig}")
        return h, (sig, stamp, scope)

    def chunk_signature(self, chain, prev, chunk):
        """The signature of a chunk of a STREAMING-AWS4-HMAC-SHA256-PAYLOAD
        body, chained to `prev`."""
        _, stamp, scope = chain
        to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", stamp, scope, prev, EMPTY_SHA256,
                             hashlib.sha256(chunk).hexdigest()])
        return hmac.new(self.key(stamp[:8]), to_sign.encode(), hashlib.sha256).hexdigest()


def object_path(bucket, key):
    """The path of an object as S3's signature canonicalises it."""
    return "/" + bucket + "/" + urllib.parse.quote(key, safe="/~")


class Raw:
    """Requests sent as they are made, over the server's HTTPS (or HTTP). A
    request with a body asks for `100 Continue` and sends its body only once
    the server said so, as the AWS SDKs do, so that a refusal before the body
    is read reaches the client whole."""

    def __init__(self, url, ca):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.tls, self.ca = u.hostname, u.port, u.scheme == "https", ca
        # The Host header, which the signatures cover.
        self.netloc = u.netloc

    def connect(self, timeout):
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        if self.tls:
            ctx = ssl.create_default_context(cafile=self.ca)
            sock = ctx.wrap_socket(sock, server_hostname=self.host)
        return sock

    def send(self, method, path, headers, body=b"", timeout=60):
        """One request: (status, body, headers); the status None when the
        connection broke (the reason in the body)."""
        h = dict(headers)
        h.setdefault("host", self.netloc)
        h["connection"] = "close"
        if body:
            h["expect"] = "100-continue"
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
        try:
            with self.connect(timeout) as sock:
                sock.sendall(head.encode() + b"\r\n")
                f = sock.makefile("rb")
                status, answer = None, None
                if body:
                    ready = sock.pending() if self.tls else 0
                    if ready or select.select([sock], [], [], 3)[0]:
                        status, answer = read_head(f)
                    if status is None or status == 100:
                        sock.sendall(body)
                        status, answer = None, None
                if status is None:
                    status, answer = read_head(f)
                    while status == 100:
                        status, answer = read_head(f)
                data = f.read()
                if answer.get("transfer-encoding", "").lower() == "chunked":
                    data = dechunk(data)
                return status, data, answer
        except (OSError, ValueError) as e:
            return None, f"{type(e).__name__}: {e}".encode(), {}


def read_head(f):
    """An answer's status line and headers (names lower case)."""
    line = f.readline()
    if not line:
        raise ConnectionError("the server closed the connection without an answer")
    status = int(line.split()[1])
    headers = {}
    for line in iter(f.readline, b"\r\n"):
        if not line:
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers


def dechunk(data):
    """The body of a chunked transfer coding."""
    out, at = [], 0
    while at < len(data):
        end = data.index(b"\r\n", at)
        size = int(data[at:end].split(b";")[0], 16)
        if size == 0:
            break
        out.append(data[end + 2:end + 2 + size])
        at = end + 2 + size + 2
    return b"".join(out)


def error_code(body):
    m = re.search(rb"<Code>([^<]*)</Code>", body or b"")
    return m.group(1).decode() if m else None


def signed_chunks(signer, chain, data, size, break_chain=False):
    """A STREAMING-AWS4-HMAC-SHA256-PAYLOAD body of `data` in chunks of `size`
    bytes and the final empty one. With `break_chain`, the second chunk's
    signature is chained to the seed signature instead of the first chunk's."""
    out, prev = [], chain[0]
    pieces = [data[i:i + size] for i in range(0, len(data), size)] + [b""]
    for n, piece in enumerate(pieces):
        sig = signer.chunk_signature(chain, chain[0] if break_chain and n == 1 else prev, piece)
        out.append(f"{len(piece):x};chunk-signature={sig}\r\n".encode() + piece + b"\r\n")
        prev = sig
    return b"".join(out)


def put_signed_streaming(raw, signer, key, data, break_chain=False):
    """A PUT of `data` as a signed streaming body in chunks of 64 KiB."""
    path = object_path(BUCKET, key)
    chain_headers = {"host": raw.netloc, "content-encoding": "aws-chunked",
                     "x-amz-decoded-content-length": str(len(data))}
    # The body's length depends on the signatures' hex, which is of fixed size.
    probe = signed_chunks(signer, ("0" * 64, "20000101T000000Z", "x"), data, 64 << 10)
    chain_headers["content-length"] = str(len(probe))
    h, chain = signer.sign("PUT", path, chain_headers, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
                           utcnow())
    body = signed_chunks(signer, chain, data, 64 << 10, break_chain)
    return raw.send("PUT", path, h, body)


def put_trailer(raw, signer, key, data, crc):
    """A PUT of `data` as an unsigned streaming body with the trailer
    x-amz-checksum-crc32 `crc`."""
    path = object_path(BUCKET, key)
    body = (f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n"
            + f"x-amz-checksum-crc32:{crc}\r\n\r\n".encode())
    h, _ = signer.sign("PUT", path, {"host": raw.netloc, "content-encoding": "aws-chunked",
                                     "x-amz-decoded-content-length": str(len(data)),
                                     "x-amz-trailer": "x-amz-checksum-crc32",
                                     "content-length": str(len(body))},
                       "STREAMING-UNSIGNED-PAYLOAD-TRAILER", utcnow())
    return raw.send("PUT", path, h, body)


def put_at(raw, signer, key, data, when):
    """A PUT of `data` signed at `when` with the body's SHA-256."""
    path = object_path(BUCKET, key)
    h, _ = signer.sign("PUT", path, {"host": raw.netloc, "content-length": str(len(data))},
                       hashlib.sha256(data).hexdigest(), when)
    return raw.send("PUT", path, h, data)


def crc32_b64(data):
    """The CRC32 of `data` as S3's checksum headers give it (base64, big-endian)."""
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


def boto_answer(f):
    """Calls f: (the error code or None, the status)."""
    try:
        r = f()
        return None, r["ResponseMetadata"]["HTTPStatusCode"]
    except ClientError as e:
        return e.response["Error"].get("Code"), e.response["ResponseMetadata"]["HTTPStatusCode"]


def cases(p, raw, signer, data):
    """Every bad request and its control: name to (got, wanted), and the keys
    the controls stored (key to bytes)."""
    s3 = p.boto()
    got, controls = {}, {}

    def case(name, answer, wanted):
        got[name] = {"code": answer[0], "status": answer[1], "wanted_code": wanted[0],
                     "wanted_status": wanted[1]}
        p.check(f"{name}: {wanted[1]} {wanted[0]}", tuple(answer) == wanted, answer)

    def raw_answer(r):
        status, body, _ = r
        return (error_code(body) if status != 200 else None), status

    def control(name, key, r):
        status, body, _ = r
        ok = status == 200
        if ok:
            controls[key] = data
        p.check(f"{name}: the same request made right is stored (200)", ok,
                (status, body[:300]))

    # A wrong secret.
    wrong = boto3.client("s3", endpoint_url=p.url, aws_access_key_id=p.ak,
                         aws_secret_access_key="x" + p.sk[1:], region_name=REGION,
                         verify=p.ca or True, config=Config(s3={"addressing_style": "path"},
                                                            retries={"total_max_attempts": 1}))
    case("wrong_secret", boto_answer(lambda: wrong.put_object(Bucket=BUCKET, Key="wrong-secret",
                                                              Body=data)),
         ("SignatureDoesNotMatch", 403))

    # An expired presigned URL, and its control within its time.
    s3.put_object(Bucket=BUCKET, Key="presigned", Body=data)
    controls["presigned"] = data
    url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "presigned"},
                                    ExpiresIn=1)
    u = urllib.parse.urlsplit(url)
    fresh = raw.send("GET", u.path + "?" + u.query, {})
    p.check("expired_presigned: the URL within its second reads the object",
            fresh[0] == 200 and fresh[1] == data, fresh[0])
    time.sleep(2.5)
    case("expired_presigned", raw_answer(raw.send("GET", u.path + "?" + u.query, {})),
         ("AccessDenied", 403))

    # Clock skew: 20 minutes either way; the control is signed now.
    control("clock_skew", "skew-control", put_at(raw, signer, "skew-control", data, utcnow()))
    for name, minutes in (("clock_skew_behind", -20), ("clock_skew_ahead", 20)):
        when = utcnow() + datetime.timedelta(minutes=minutes)
        case(name, raw_answer(put_at(raw, signer, f"skew{minutes}", data, when)),
             ("RequestTimeTooSkewed", 403))

    # A signed streaming body whose chunks do not chain.
    control("chunk_chain", "chunks-control",
            put_signed_streaming(raw, signer, "chunks-control", data))
    case("chunk_chain", raw_answer(put_signed_streaming(raw, signer, "chunks-bad", data,
                                                        break_chain=True)),
         ("SignatureDoesNotMatch", 403))

    # A CRC32 trailer that is not the body's.
    control("crc32_trailer", "trailer-control",
            put_trailer(raw, signer, "trailer-control", data, crc32_b64(data)))
    case("crc32_trailer", raw_answer(put_trailer(raw, signer, "trailer-bad", data,
                                                 crc32_b64(data + b"!"))),
         ("BadDigest", 400))

    # Multipart: a first part under 5 MiB, then part number 10,001.
    up = s3.create_multipart_upload(Bucket=BUCKET, Key="small-parts")["UploadId"]
    part = os.urandom(1 << 20)
    etags = [s3.upload_part(Bucket=BUCKET, Key="small-parts", UploadId=up, PartNumber=n,
                            Body=part)["ETag"] for n in (1, 2)]
    case("part_too_small", boto_answer(lambda: s3.complete_multipart_upload(
        Bucket=BUCKET, Key="small-parts", UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in zip((1, 2), etags)]})),
        ("EntityTooSmall", 400))
    case("part_10001", boto_answer(lambda: s3.upload_part(
        Bucket=BUCKET, Key="small-parts", UploadId=up, PartNumber=10001, Body=b"x")),
        ("InvalidArgument", 400))
    parts = s3.list_parts(Bucket=BUCKET, Key="small-parts", UploadId=up).get("Parts", [])
    p.check("part_10001: the upload holds its two parts only",
            [x["PartNumber"] for x in parts] == [1, 2], [x["PartNumber"] for x in parts])
    uploads = s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
    p.check("part_too_small: the refused upload is kept, as S3 keeps it",
            [u["UploadId"] for u in uploads] == [up], uploads)
    s3.abort_multipart_upload(Bucket=BUCKET, Key="small-parts", UploadId=up)
    uploads = s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
    p.check("part_too_small: aborted, no upload is left", not uploads, uploads)

    # Keys that cannot name an object.
    for name, key, wanted in (("key_1025", "k" * 1025, ("KeyTooLongError", 400)),
                              ("key_dotdot", "a/../b", ("InvalidArgument", 400)),
                              ("key_nul", "a\0b", ("InvalidArgument", 400))):
        case(name, boto_answer(lambda: s3.put_object(Bucket=BUCKET, Key=key, Body=data)), wanted)
    return got, controls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default=None, help="a folder for the home (emptied first)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--quick", action="store_true",
                    help="the same requests with a 4 KiB body instead of 200 KiB")
    ap.add_argument("--plain", action="store_true", help="serve plain HTTP instead of HTTPS")
    ap.add_argument("--capacity", type=int, default=8 << 30, help="bytes per cartridge")
    ap.add_argument("--slots", type=int, default=4)
    a = ap.parse_args()
    # What the server and the home need of the options (no restore is asked).
    a.archive, a.standard_window, a.bulk_window = True, 10, 10
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"{a.bin} is not an executable (cargo build --release -p tapeloom "
                 f"--features tapeloom/test-hooks)")
    a.work = a.work or os.path.join(default_work_parent(), "tapeloom-s3-bad")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    home = os.path.join(a.work, "home")
    key, _ = new_home(a, home, [BUCKET], ["--batch-age", "3600"])
    c = Checks()
    transport = "plain" if a.plain else "tls"
    p = Pass(a, c, transport, key, home, a.work)
    p.start()
    raw = Raw(p.url, p.ca)
    signer = Signer(*key)
    data = os.urandom((4 if a.quick else 200) << 10)
    doc = {"bench": "s3_bad", "quick": a.quick, "transport": transport, "body_bytes": len(data)}
    try:
        got, controls = cases(p, raw, signer, data)
        doc["answers"] = got
        listed = p.objects(BUCKET)
        p.check("the bucket lists the controls and nothing else",
                sorted(listed) == sorted(controls), sorted(listed))
        same = [k for k in controls if p.boto().get_object(Bucket=BUCKET, Key=k)["Body"].read()
                == controls[k]]
        p.check("every control reads back identical", sorted(same) == sorted(controls), same)
        doc["listed"] = sorted(listed)
        p.check("the server still answers (ListBuckets)",
                any(b["Name"] == BUCKET for b in p.boto().list_buckets()["Buckets"]))
    except Exception as e:  # noqa: BLE001 (a crash is a failed check, and the log is still read)
        c.check("the requests ran to their end", False, f"{type(e).__name__}: {e}")
    finally:
        p.server.stop()
    with open(os.path.join(a.work, "server.log"), errors="replace") as f:
        text = f.read()
    p.check("the server's log has no \"panicked\"", "panicked" not in text,
            [x for x in text.splitlines() if "panicked" in x][:3])
    doc.update(checks=c.count, failed=c.failed, **{"pass": not c.failed})
    if not a.keep and not c.failed:
        shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(doc, indent=2))
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
