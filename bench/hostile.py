#!/usr/bin/env python3
"""Hostile cartridges and bad input at the command line, as one JSON document on
stdout (progress on stderr).

Part `tapes`: one home holds an earlier job (job 1) and a job of a rich tree (job 2,
64 KiB blocks: files across blocks, a sparse file, a symlink, a hard link, a fifo,
xattrs, an empty file). Each case damages a copy of the home's cartridge:

  field     one field of one record of job 2 (FORMAT.md 5: JobStart, Entry, Data,
            FileEnd, StreamEnd, Index, JobEnd, and every record's header) set to a
            hostile value (0, the largest, one more, 2^63; paths made absolute,
            `..`, holding a NUL), with the block CRCs computed again so that the
            change reaches the decoder;
  block     one field of a block header (4.2) or of the label (4.1), resealed;
  index     the cartridge's index sidecar (FORMAT.md 8) missing, empty, short, with
            a bad entry, offsets past the data, a length one off.

and runs `verify 2`, `restore 2`, `ls 2`, `catalog rebuild` (on a copy without its
catalog) and `verify 1`. Checks, each case: no panic (exit 101) and no hang (60 s);
the cartridge's data file unchanged by every command; nothing written outside the
restore's target; a restore that exits 0 restored every file identical to its
source, and one that does not names what it missed, every other file identical; a
verify that passes means a restore that does too; the earlier job still verifies.
Index damage must leave every command working, and the job identical.

Part `cli`: bad input at the command line, each case a fresh home: missing,
unreadable, growing and special sources; restores onto existing, read-only, full and
foreign-owned targets; homes on full and read-only file systems (tmpfs and bind
mounts in a mount namespace of the harness's own: `unshare -m` as root, `-r -m`
otherwise); two backups at once; options at their bounds; a closed stdout. Checks:
no panic, no hang, exit status and one line per problem where data was missed, every
other file identical, earlier jobs still verify.

  python3 bench/hostile.py --quick
  python3 bench/hostile.py --only tapes > out.json
"""
import argparse, hashlib, json, os, shutil, sqlite3, struct, subprocess, sys, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 60


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


T0 = time.monotonic()

# ---------------------------------------------------------------------------
# CRC32C (Castagnoli), as FORMAT.md 2 defines it.

_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data, crc=0):
    """The CRC of `data` appended to bytes whose CRC is `crc` (0: none)."""
    crc ^= 0xFFFFFFFF
    t = _TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def reseal(block):
    """The block's CRC over bytes 0..60 and 64.. written again (FORMAT.md 4.2)."""
    c = crc32c(bytes(block[64:]), crc32c(bytes(block[:60])))
    block[60:64] = struct.pack("<I", c)


def reseal_label(label):
    label[1020:1024] = struct.pack("<I", crc32c(bytes(label[:1020])))


# ---------------------------------------------------------------------------
# Running tapeloom.

class Result:
    def __init__(self, code, out, err, hung=False):
        self.code, self.out, self.err, self.hung = code, out, err, hung

    def doc(self):
        try:
            return json.loads(self.out)
        except ValueError:
            return None

    def panicked(self):
        return self.code == 101 or "panicked" in self.err

    def err_lines(self):
        return [l for l in self.err.splitlines() if l.strip()]


def tl(a, home, *args, json_out=True, stdin=subprocess.DEVNULL, prefix=(), env=None, timeout=TIMEOUT):
    cmd = [*prefix, a.bin, "--home", home]
    if json_out:
        cmd.append("--json")
    cmd += [str(x) for x in args]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", stdin=stdin,
                           timeout=timeout, env=env)
        return Result(p.returncode, p.stdout, p.stderr)
    except subprocess.TimeoutExpired as e:
        return Result(-9, e.stdout or "", str(e.stderr or ""), hung=True)


class Case:
    """One case's checks."""

    def __init__(self, part, name):
        self.part, self.name = part, name
        self.checks = 0
        self.failed = []
        self.t0 = time.monotonic()

    def check(self, what, ok, why=""):
        self.checks += 1
        if not ok:
            self.failed.append(f"{what}: {why}"[:400])

    def sane(self, what, r):
        """No panic, no hang."""
        self.check(f"{what} no panic", not r.panicked(), r.err[-300:])
        self.check(f"{what} no hang", not r.hung, "timed out")

    def doc(self):
        return {"part": self.part, "case": self.name, "checks": self.checks,
                "failed": self.failed, "seconds": round(time.monotonic() - self.t0, 2)}


def sha(path):
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except FileNotFoundError:
        return None
    return h.hexdigest()


def files_of(root):
    """Regular files under root: relative path -> sha256."""
    out = {}
    for d, dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            out[os.path.relpath(p, root)] = sha(p)
    return out


def listing(root, skip):
    """Every path under root but those under `skip` folders (what a command must not touch)."""
    out = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if os.path.join(d, x) not in skip]
        for f in files + dirs:
            out.add(os.path.relpath(os.path.join(d, f), root))
    return out


def copy_home(src, dst):
    shutil.rmtree(dst, ignore_errors=True)
    subprocess.run(["cp", "-a", src, dst], check=True)


def errors_named(doc):
    """Paths a restore's or verify's JSON names as not restored or damaged."""
    if not isinstance(doc, dict):
        return set()
    out = set()
    for key in ("errors", "damaged", "missing", "not_restored", "bad_entries"):
        for e in doc.get(key) or []:
            if isinstance(e, dict) and isinstance(e.get("path"), str):
                out.add(e["path"])
            elif isinstance(e, str):
                out.add(e)
    return out


def compare_restore(case, what, r, src_files, out_dir, excused=()):
    """A restore that exits 0 restored every source file identical; one that does
    not names what it missed, and every file it does not name is identical."""
    got = files_of(out_dir) if os.path.isdir(out_dir) else {}
    if r.code != 0 and r.doc() is None:
        # Refused as a whole (a cartridge it cannot read at all): one line says why.
        case.check(f"{what} refused as a whole says why in one line", len(r.err_lines()) == 1, r.err[-300:])
        return
    named = errors_named(r.doc())
    bad = []
    for p, h in src_files.items():
        if p in excused:
            continue
        if got.get(p) != h and not any(p == n or p.startswith(n.rstrip("/") + "/") or n.endswith("/" + p) or n == p
                                        for n in named):
            bad.append(p)
    if r.code == 0:
        case.check(f"{what} exit 0 means every file identical", not bad, f"differ or missing: {bad[:4]}")
    else:
        case.check(f"{what} says why it failed", bool(r.err_lines()), "nothing on stderr")
        case.check(f"{what} names what it missed; the rest identical", not bad, f"unnamed: {bad[:4]}; named {sorted(named)[:4]}")
    temps = [p for p in got if ".tapeloom-" in os.path.basename(p)]
    case.check(f"{what} leaves no temporary file", not temps, str(temps[:3]))


# ---------------------------------------------------------------------------
# Part `tapes`.

def make_tree(root):
    os.makedirs(os.path.join(root, "dir/sub"), exist_ok=True)
    rnd = lambda n, seed: hashlib.shake_256(str(seed).encode()).digest(n)
    with open(os.path.join(root, "small.txt"), "wb") as f:
        f.write(b"small file\n")
    with open(os.path.join(root, "dir/across.bin"), "wb") as f:
        f.write(rnd(300_000, 1))
    with open(os.path.join(root, "dir/sub/tiny.txt"), "wb") as f:
        f.write(b"tiny")
    with open(os.path.join(root, "empty"), "wb"):
        pass
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(rnd(1_808_917, 2))
    with open(os.path.join(root, "sparse.bin"), "wb") as f:
        f.seek(1_000_000)
        f.write(b"tail of a sparse file")
    os.symlink("dir/across.bin", os.path.join(root, "link"))
    os.link(os.path.join(root, "small.txt"), os.path.join(root, "hard.txt"))
    os.mkfifo(os.path.join(root, "a.fifo"))
    try:
        os.setxattr(os.path.join(root, "small.txt"), "user.note", b"kept")
    except OSError:
        pass


class Cartridge:
    """A virtual cartridge's objects, from its index sidecar."""

    def __init__(self, home, barcode="TL0001L9"):
        self.dp = os.path.join(home, "library/tapes", barcode + ".data")
        self.ip = os.path.join(home, "library/tapes", barcode + ".idx")
        with open(self.dp, "rb") as f:
            self.data = bytearray(f.read())
        with open(self.ip, "rb") as f:
            idx = f.read()
        self.objects = [struct.unpack_from("<QII", idx, i) for i in range(0, len(idx) - 15, 16)]

    def blocks(self):
        """(lbn, offset, length, header fields) of every data block."""
        out = []
        for lbn, (off, ln, kind) in enumerate(self.objects):
            if kind != 0 or ln < 64 or self.data[off:off + 4] != b"TLBK":
                continue
            tag, stream, flags, plen, soff, first = struct.unpack_from("<QHHIQI", self.data, off + 32)
            out.append(dict(lbn=lbn, off=off, len=ln, tag=tag, stream=stream, flags=flags,
                            plen=plen, soff=soff, first=first))
        return out

    def write(self):
        with open(self.dp, "wb") as f:
            f.write(self.data)


class Stream:
    """One stream of a job: its bytes, and where each came from on the cartridge."""

    def __init__(self, cart, blocks):
        self.cart = cart
        self.pieces = []  # (stream offset, data offset of the payload, payload length)
        self.bytes = bytearray()
        for b in sorted(blocks, key=lambda b: b["soff"]):
            if b["soff"] != len(self.bytes):
                break
            self.pieces.append((b["soff"], b["off"] + 64, b["plen"], b))
            self.bytes += cart.data[b["off"] + 64:b["off"] + 64 + b["plen"]]

    def records(self):
        """(kind, offset of its header, body length) of each record."""
        out, pos = [], 0
        while pos + 16 <= len(self.bytes):
            kind, _r1, _r2, ln = struct.unpack_from("<HHIQ", self.bytes, pos)
            out.append((kind, pos, ln))
            if pos + 16 + ln > len(self.bytes) or kind == 0:
                break
            pos += 16 + ln
        return out

    def patch(self, at, value):
        """Writes `value` at stream offset `at` on the cartridge, resealing each block."""
        touched = []
        for soff, doff, plen, b in self.pieces:
            lo, hi = max(at, soff), min(at + len(value), soff + plen)
            if lo >= hi:
                continue
            self.cart.data[doff + lo - soff:doff + hi - soff] = value[lo - at:hi - at]
            touched.append(b)
        for b in touched:
            blk = self.cart.data[b["off"]:b["off"] + b["len"]]
            reseal(blk)
            self.cart.data[b["off"]:b["off"] + b["len"]] = blk
        return bool(touched)


KIND = {1: "JobStart", 3: "Entry", 4: "Data", 5: "FileEnd", 6: "StreamEnd", 7: "Index", 8: "JobEnd"}
U64, U32, U16, U8 = (8, "<Q"), (4, "<I"), (2, "<H"), (1, "<B")

# Fields of each record's body: (name, offset, type). Offsets follow FORMAT.md 5.
FIELDS = {
    "JobStart": [("job tag", 0, U64), ("start ns", 16, U32), ("block size", 20, U32),
                 ("volume sequence", 24, U32), ("name length", 28, U16)],
    "Entry": [("type", 0, U8), ("flags", 1, U8), ("reserved", 2, U16), ("mode", 4, U32),
              ("size", 16, U64), ("mtime ns", 32, U32), ("rdev", 48, U64), ("path length", 56, U32)],
    "Data": [("first byte", 0, U8)],
    "FileEnd": [("crc", 0, U32), ("status", 4, U8), ("reserved", 5, U8)],
    "StreamEnd": [("entries", 0, U64), ("bytes", 8, U64)],
    "Index": [("count", 0, U32), ("stream", 4, U16), ("type", 6, U8), ("flags", 7, U8), ("size", 8, U64),
              ("start lbn", 36, U64), ("start offset", 44, U32), ("end lbn", 52, U64), ("crc", 60, U32)],
    "JobEnd": [("status", 20, U8), ("reserved", 21, U8), ("entries", 24, U64), ("index lbn", 44, U64),
               ("volume count", 56, U32)],
}
HEADER_FIELDS = [("record kind", -16, U16), ("record reserved", -14, U16), ("record length", -8, U64)]


def hostile_values(ty, old, quick):
    size, fmt = ty
    top = (1 << (8 * size)) - 1
    vals = [0, top, (old + 1) & top]
    if size == 8:
        vals.append(1 << 63)
    if quick:
        vals = vals[1:3] if size < 8 else [vals[1], vals[3]]
    return [v for v in dict.fromkeys(vals) if v != old]


def field_cases(base, quick):
    """(name, patch function) for each field mutation of job 2's records."""
    cart = Cartridge(base)
    db = sqlite3.connect(os.path.join(base, "catalog.sqlite"))
    tag = db.execute("SELECT tag FROM jobs WHERE id = 2").fetchone()[0] & ((1 << 64) - 1)
    db.close()
    blocks = [b for b in cart.blocks() if b["tag"] == tag]
    cases = []
    by_stream = {}
    for b in blocks:
        by_stream.setdefault(b["stream"], []).append(b)
    for sid, bl in sorted(by_stream.items()):
        if sid == 0xFFFF:
            continue
        s = Stream(cart, bl)
        seen = {}
        for kind, pos, ln in s.records():
            name = KIND.get(kind)
            if name is None:
                continue
            seen[name] = seen.get(name, 0) + 1
            # The first record of each kind, and (in full runs) the entry of the big
            # file (its data spans blocks).
            if seen[name] > (1 if quick else 3):
                continue
            body = pos + 16
            fields = [(f, body + o, t) for f, o, t in FIELDS.get(name, []) if o + t[0] <= ln]
            fields += [(f, body + o, t) for f, o, t in HEADER_FIELDS] if seen[name] == 1 else []
            for fname, at, ty in fields:
                old = struct.unpack_from(ty[1], s.bytes, at)[0]
                for v in hostile_values(ty, old, quick):
                    label = f"stream {sid} {name} #{seen[name]} {fname}={v}"
                    cases.append((label, sid, at, struct.pack(ty[1], v)))
            if name in ("Entry", "Index") and seen[name] == 1:
                # The path: made absolute, climbing out, holding a NUL.
                plen_at = body + (56 if name == "Entry" else 64 + (28 if s.bytes[body + 7] & 4 else 0))
                if plen_at + 4 <= len(s.bytes):
                    plen = struct.unpack_from("<I", s.bytes, plen_at)[0]
                    if 2 <= plen < 200 and plen_at + 4 + plen <= len(s.bytes):
                        for hostile in (b"/" + b"x" * (plen - 1), b"../" + b"e" * (plen - 3) if plen > 3 else b"..",
                                        b"a\0" + b"b" * (plen - 2)):
                            hostile = hostile[:plen].ljust(plen, b"x")
                            cases.append((f"stream {sid} {name} path={hostile!r}", sid, plen_at + 4, hostile))
    return cases, tag


def block_cases(base, tag, quick):
    """(name, lbn, offset in block, value) for block header and label fields."""
    cart = Cartridge(base)
    blocks = [b for b in cart.blocks() if b["tag"] == tag]
    data_block = next(b for b in blocks if b["stream"] not in (0, 0xFFFF))
    first = blocks[0]
    out = []
    for b, what in ((data_block, "data block"), (first, "first block")):
        fields = [("magic", 0, b"TLBX"), ("write version", 4, b"\x09"), ("read version", 5, b"\x09"),
                  ("header length", 6, struct.pack("<H", 65)), ("volume", 8, b"\x00" * 16),
                  ("lbn", 24, struct.pack("<Q", b["lbn"] + 1)), ("stream", 40, struct.pack("<H", 9)),
                  ("flags", 42, struct.pack("<H", 4)), ("payload length", 44, struct.pack("<I", 0xFFFFFFFF)),
                  ("payload length+1", 44, struct.pack("<I", b["plen"] + 1)),
                  ("stream offset", 48, struct.pack("<Q", b["soff"] + 1)),
                  ("first record", 56, struct.pack("<I", b["plen"]))]
        if quick:
            fields = fields[2::3]
        out += [(f"{what} {n}", b["lbn"], o, v) for n, o, v in fields]
    out += [("label read version", 0, 10, b"\x09\x00"), ("label length", 0, 12, b"\x00\x00\x00\x00")]
    return out


INDEX_DAMAGES = ["missing", "empty", "short", "bad entry", "offsets past the data", "last length +1",
                 "last length -1"]


def damage_index(path, what):
    with open(path, "rb") as f:
        raw = bytearray(f.read())
    n = len(raw) // 16
    last_block = n - 2
    if what == "missing":
        os.remove(path)
        return
    if what == "empty":
        raw = bytearray()
    elif what == "short":
        raw = raw[:len(raw) - 21]
    elif what == "bad entry":
        raw[3 * 16 + 12:3 * 16 + 16] = struct.pack("<I", 7)
    elif what == "offsets past the data":
        for i in range(4, n):
            off = struct.unpack_from("<Q", raw, i * 16)[0]
            raw[i * 16:i * 16 + 8] = struct.pack("<Q", off + (1 << 32))
    elif what.startswith("last length"):
        ln = struct.unpack_from("<I", raw, last_block * 16 + 8)[0]
        ln += 1 if what.endswith("+1") else -1
        raw[last_block * 16 + 8:last_block * 16 + 12] = struct.pack("<I", ln)
    with open(path, "wb") as f:
        f.write(raw)


def run_tape_case(a, case, work, base, src_files, damage, index_damage=False, label_damage=False,
                  forbidden=()):
    """Damages a copy of the base home, runs the read commands, checks."""
    home = os.path.join(work, "home")
    copy_home(base, home)
    damage(home)
    data = os.path.join(home, "library/tapes/TL0001L9.data")
    before = sha(data)
    outside = listing(work, {home, os.path.join(work, "out"), os.path.join(work, "rebuilt")})
    results = {}
    for what, args in (("verify", ("verify", 2)), ("restore", ("restore", 2, "--to", os.path.join(work, "out"))),
                       ("ls", ("ls", 2))):
        shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
        if index_damage and what != "verify":
            # Each command meets the damaged index, not the one the last rebuilt.
            copy_home(base, home)
            damage(home)
        r = tl(a, home, *args)
        results[what] = r
        case.sane(what, r)
        case.check(f"{what} leaves the data file as it was", sha(data) == before, "changed")
        if what == "restore":
            compare_restore(case, "restore", r, src_files, os.path.join(work, "out"))
    # Rebuild on a copy without its catalog.
    rebuilt = os.path.join(work, "rebuilt")
    copy_home(base, rebuilt)
    damage(rebuilt)
    for f in ("catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"):
        if os.path.exists(os.path.join(rebuilt, f)):
            os.remove(os.path.join(rebuilt, f))
    rdata = os.path.join(rebuilt, "library/tapes/TL0001L9.data")
    rbefore = sha(rdata)
    r = tl(a, rebuilt, "catalog", "rebuild")
    case.sane("rebuild", r)
    case.check("rebuild leaves the data file as it was", sha(rdata) == rbefore, "changed")
    if r.code != 0:
        case.check("rebuild says why it failed", bool(r.err_lines()), "nothing on stderr")
    v = results["verify"]
    if v.code == 0:
        case.check("a verify that passes means a restore that does", results["restore"].code == 0,
                   results["restore"].err[-300:])
    if index_damage:
        for what, res in results.items():
            case.check(f"{what} works on a rebuilt index", res.code == 0, res.err[-300:])
    if not label_damage:
        # Job 1 shares only the label with job 2.
        e = tl(a, home, "verify", 1)
        case.check("the earlier job still verifies", e.code == 0, e.err[-300:])
    after = listing(work, {home, os.path.join(work, "out"), os.path.join(work, "rebuilt")})
    case.check("nothing written outside the target", after == outside, str(sorted(after ^ outside)[:4]))
    # An absolute path from the tape names a place outside every target.
    for p in forbidden:
        case.check(f"nothing written at {p}", not os.path.lexists(p), "written")
    shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)


def part_tapes(a, work):
    cases = []
    src, early = os.path.join(work, "src"), os.path.join(work, "earlier")
    make_tree(src)
    os.makedirs(early)
    with open(os.path.join(early, "e.txt"), "wb") as f:
        f.write(b"earlier job\n" * 100)
    base = os.path.join(work, "base")
    for args in (("backup", early), ("backup", src, "--block-size", "64K")):
        r = tl(a, base, *args)
        if r.code != 0:
            raise SystemExit(f"setup backup failed: {r.err}")
    src_files = files_of(src)
    cwork = os.path.join(work, "case")
    os.makedirs(cwork)

    fcases, tag = field_cases(base, a.quick)
    for label, sid, at, value in fcases:
        case = Case("tapes", f"field: {label}")

        def damage(home, sid=sid, at=at, value=value):
            cart = Cartridge(home)
            bl = [b for b in cart.blocks() if b["tag"] == tag and b["stream"] == sid]
            Stream(cart, bl).patch(at, value)
            cart.write()
        forbidden = []
        if value.startswith(b"/") and b"\0" not in value:
            forbidden.append(os.fsdecode(value.split(b"/")[1] and b"/" + value.split(b"/")[1]))
        run_tape_case(a, case, cwork, base, src_files, damage, forbidden=forbidden)
        cases.append(case)
        log(f"{case.name}: {len(case.failed)} failed of {case.checks}")

    for label, lbn, at, value in block_cases(base, tag, a.quick):
        case = Case("tapes", f"block: {label}")

        def damage(home, lbn=lbn, at=at, value=value):
            cart = Cartridge(home)
            off, ln, _ = cart.objects[lbn]
            blk = cart.data[off:off + ln]
            blk[at:at + len(value)] = value
            if lbn == 0:
                reseal_label(blk)
            else:
                reseal(blk)
            cart.data[off:off + ln] = blk
            cart.write()
        run_tape_case(a, case, cwork, base, src_files, damage, label_damage=lbn == 0)
        cases.append(case)
        log(f"{case.name}: {len(case.failed)} failed of {case.checks}")

    for what in INDEX_DAMAGES:
        case = Case("tapes", f"index: {what}")
        run_tape_case(a, case, cwork, base, src_files,
                      lambda home, what=what: damage_index(os.path.join(home, "library/tapes/TL0001L9.idx"), what),
                      index_damage=True)
        cases.append(case)
        log(f"{case.name}: {len(case.failed)} failed of {case.checks}")
    return cases


# ---------------------------------------------------------------------------
# Part `cli`.

def in_namespace(script, env):
    """Runs a shell script in a mount namespace of its own; None when none can be had."""
    ns = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]
    try:
        p = subprocess.run([*ns, "sh", "-c", script], capture_output=True, text=True, errors="replace",
                           env={**os.environ, **env}, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode == 90:
        return None
    return p


def step_codes(p):
    out = {}
    for line in p.stdout.splitlines():
        parts = line.split(" ", 1)
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def cli_cases(a, work):
    out = []

    def new(name):
        c = Case("cli", name)
        out.append(c)
        d = os.path.join(work, f"c{len(out):02d}")
        os.makedirs(d)
        return c, d

    def tree(d, name="src"):
        s = os.path.join(d, name)
        make_tree(s)
        return s

    def earlier(c, home, d):
        e = os.path.join(d, "earlier")
        os.makedirs(e, exist_ok=True)
        with open(os.path.join(e, "e.txt"), "wb") as f:
            f.write(b"earlier\n" * 1000)
        r = tl(a, home, "backup", e)
        c.check("earlier backup", r.code == 0, r.err)

    def still_verifies(c, home, job=1):
        r = tl(a, home, "verify", job)
        c.check(f"job {job} still verifies", r.code == 0, r.err[-300:])

    # Missing source.
    c, d = new("a missing source")
    home = os.path.join(d, "home")
    earlier(c, home, d)
    r = tl(a, home, "backup", os.path.join(d, "nothing-here"))
    c.sane("backup", r)
    c.check("exit 1", r.code == 1, str(r.code))
    c.check("one line naming it", len(r.err_lines()) == 1 and "nothing-here" in r.err, r.err)
    still_verifies(c, home)

    # Unreadable source files (read as an unprivileged user when root).
    c, d = new("unreadable source files")
    home = os.path.join(d, "home")
    s = tree(d)
    os.chmod(os.path.join(s, "dir/across.bin"), 0)
    os.chmod(os.path.join(s, "dir/sub"), 0)
    prefix = ()
    if os.geteuid() == 0:
        for p in (d, home):
            os.makedirs(p, exist_ok=True)
            os.chmod(p, 0o777)
        for root, dirs, files in os.walk(s):
            os.chmod(root, 0o755 if root != os.path.join(s, "dir/sub") else 0)
        os.chmod(os.path.join(s, "dir/sub"), 0)
        prefix = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    r = tl(a, home, "backup", s, prefix=prefix, env={**os.environ, "HOME": home})
    c.sane("backup", r)
    doc = r.doc() or {}
    named = {e.get("path", "") for e in doc.get("errors", [])}
    c.check("non-zero exit", r.code != 0, f"exit {r.code}, status {doc.get('status')}")
    c.check("each unreadable object named", any(n.endswith("across.bin") for n in named)
            and any(n.endswith("sub") for n in named), str(named))
    os.chmod(os.path.join(s, "dir/across.bin"), 0o644)
    os.chmod(os.path.join(s, "dir/sub"), 0o755)

    # A source that grows while it is read.
    c, d = new("a growing source")
    home = os.path.join(d, "home")
    s = os.path.join(d, "src")
    os.makedirs(s)
    grow = os.path.join(s, "growing.log")
    writer = subprocess.Popen([sys.executable, "-c",
                               "import sys,time\nf=open(sys.argv[1],'ab',0)\n"
                               "end=time.time()+3\n"
                               "while time.time()<end: f.write(b'x'*65536)\n", grow])
    time.sleep(0.3)
    r = tl(a, home, "backup", s)
    writer.wait()
    c.sane("backup", r)
    c.check("backup ends", r.code in (0, 1), r.err)
    if r.code == 0 or (r.doc() or {}).get("job_id"):
        out_dir = os.path.join(d, "out")
        rr = tl(a, home, "restore", (r.doc() or {}).get("job_id", 1), "--to", out_dir)
        c.sane("restore", rr)
        got = os.path.join(out_dir, "growing.log")
        if rr.code == 0 and os.path.exists(got):
            n = os.path.getsize(got)
            with open(got, "rb") as f1, open(grow, "rb") as f2:
                c.check("the restored file is what was read of it", f1.read() == f2.read(n), "differs")

    # Special sources: a fifo, a device, a socket's folder, a symlink to a folder.
    c, d = new("special sources")
    home = os.path.join(d, "home")
    fifo = os.path.join(d, "a.fifo")
    os.mkfifo(fifo)
    s = tree(d)
    os.symlink(s, os.path.join(d, "via-link"))
    for src_arg in (fifo, "/dev/null", os.path.join(d, "via-link")):
        r = tl(a, home, "backup", src_arg, timeout=30)
        c.sane(f"backup {os.path.basename(src_arg)}", r)
        c.check(f"backup {os.path.basename(src_arg)} ends with one line or a job",
                r.code == 0 or len(r.err_lines()) == 1, r.err)

    # Restores onto an existing tree: files that differ are kept, the rest identical.
    c, d = new("a restore onto existing files")
    home = os.path.join(d, "home")
    s = tree(d)
    r = tl(a, home, "backup", s)
    c.check("backup", r.code == 0, r.err)
    out_dir = os.path.join(d, "out")
    os.makedirs(os.path.join(out_dir, "dir"))
    with open(os.path.join(out_dir, "dir/across.bin"), "wb") as f:
        f.write(b"mine, not the backup's")
    r = tl(a, home, "restore", 1, "--to", out_dir)
    c.sane("restore", r)
    with open(os.path.join(out_dir, "dir/across.bin"), "rb") as f:
        c.check("the file there is kept", f.read() == b"mine, not the backup's", "replaced")
    compare_restore(c, "restore", r, files_of(s), out_dir, excused={"dir/across.bin"})

    # Restores onto read-only, full and foreign-owned targets, and homes on full and
    # read-only file systems, in a mount namespace of the harness's own.
    c, d = new("restores onto read-only and full targets, a read-only home")
    home = os.path.join(d, "home")
    s = tree(d)
    r = tl(a, home, "backup", s)
    c.check("backup", r.code == 0, r.err)
    ro, full = os.path.join(d, "ro"), os.path.join(d, "full")
    for p in (ro, full):
        os.makedirs(p)
    script = f'''
        mount -t tmpfs -o size=1m tmpfs "$FULL" || exit 90
        mount --bind "$RO" "$RO" && mount -o remount,bind,ro "$RO" || exit 90
        "$T" --home "$H" --json restore 1 --to "$RO/out" >"$D/ro.json" 2>"$D/ro.err"; echo "ro $?"
        "$T" --home "$H" --json restore 1 --to "$FULL/out" >"$D/full.json" 2>"$D/full.err"; echo "full $?"
        ls -a "$FULL/out" "$FULL/out/dir" > "$D/full.ls" 2>&1
        cp -a "$FULL/out" "$D/full-out" 2>/dev/null
        mount --bind "$H" "$H" && mount -o remount,bind,ro "$H" || exit 90
        "$T" --home "$H" ls 1 >/dev/null 2>"$D/rohome-ls.err"; echo "rohome_ls $?"
        "$T" --home "$H" verify 1 >/dev/null 2>"$D/rohome-verify.err"; echo "rohome_verify $?"
        "$T" --home "$H" backup "$S" >/dev/null 2>"$D/rohome-backup.err"; echo "rohome_backup $?"
    '''
    p = in_namespace(script, {"FULL": full, "RO": ro, "T": a.bin, "H": home, "D": d, "S": s})
    if p is None:
        c.check("a mount namespace for the file system cases", False, "unshare -m failed")
    else:
        codes = step_codes(p)
        rd = lambda f: open(os.path.join(d, f), errors="replace").read() if os.path.exists(os.path.join(d, f)) else ""
        c.check("no panic", "panicked" not in "".join(rd(f) for f in os.listdir(d) if f.endswith(".err")), "panicked")
        c.check("restore onto read-only target fails", codes.get("ro") not in (None, 0, 101), str(codes))
        ro_err = [l for l in rd("ro.err").splitlines() if l.strip()]
        c.check("... in one line", len(ro_err) == 1, rd("ro.err")[-300:])
        c.check("restore onto a full target fails", codes.get("full") not in (None, 0, 101), str(codes))
        full_res = Result(codes.get("full", -1), rd("full.json"), rd("full.err"))
        compare_restore(c, "restore onto a full target", full_res, files_of(s), os.path.join(d, "full-out"))
        c.check("ls on a read-only home works", codes.get("rohome_ls") == 0, rd("rohome-ls.err"))
        c.check("verify on a read-only home works", codes.get("rohome_verify") == 0,
                rd("rohome-verify.err"))
        c.check("backup on a read-only home fails in one line",
                codes.get("rohome_backup") not in (None, 0, 101) and len(rd("rohome-backup.err").splitlines()) == 1,
                f"{codes.get('rohome_backup')}: {rd('rohome-backup.err')}")
    still_verifies(c, home)

    c, d = new("a home on a full file system")
    fs = os.path.join(d, "fs")
    os.makedirs(fs)
    big = os.path.join(d, "big")
    os.makedirs(big)
    with open(os.path.join(big, "big.bin"), "wb") as f:
        f.write(os.urandom(12_000_000))
    small = os.path.join(d, "small")
    os.makedirs(small)
    with open(os.path.join(small, "a.txt"), "w") as f:
        f.write("a")
    script = '''
        mount -t tmpfs -o size=8m tmpfs "$FS" || exit 90
        H="$FS/home"
        "$T" --home "$H" backup "$SMALL" >/dev/null 2>"$D/s1.err"; echo "small1 $?"
        "$T" --home "$H" backup "$BIG" >/dev/null 2>"$D/big.err"; echo "big $?"
        "$T" --home "$H" library trim >/dev/null 2>"$D/trim.err"; echo "trim $?"
        "$T" --home "$H" verify 1 >/dev/null 2>"$D/v.err"; echo "verify $?"
        "$T" --home "$H" backup "$SMALL" >/dev/null 2>"$D/s2.err"; echo "small2 $?"
    '''
    p = in_namespace(script, {"FS": fs, "T": a.bin, "D": d, "SMALL": small, "BIG": big})
    if p is None:
        c.check("a mount namespace for the file system cases", False, "unshare -m failed")
    else:
        codes = step_codes(p)
        big_err = open(os.path.join(d, "big.err"), errors="replace").read()
        c.check("the first backup", codes.get("small1") == 0, str(codes))
        c.check("the backup that fills it fails", codes.get("big") == 1, str(codes))
        c.check("... in one line naming free space and what to do",
                len(big_err.splitlines()) == 1 and "free" in big_err and "library trim" in big_err, big_err)
        c.check("trim, then the earlier job verifies and a backup fits",
                (codes.get("trim"), codes.get("verify"), codes.get("small2")) == (0, 0, 0), str(codes))

    # A foreign-owned target: an unprivileged user restoring into root's folder.
    if os.geteuid() == 0:
        c, d = new("a restore into a folder owned by someone else")
        home = os.path.join(d, "home")
        s = tree(d)
        r = tl(a, home, "backup", s)
        c.check("backup", r.code == 0, r.err)
        target = os.path.join(d, "root-owned")
        os.makedirs(target)
        os.chmod(d, 0o755)
        subprocess.run(["chmod", "-R", "a+rwX", home], check=True)
        r = tl(a, home, "restore", 1, "--to", os.path.join(target, "out"),
               prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"),
               env={**os.environ, "HOME": d})
        c.sane("restore", r)
        c.check("refused with one line", r.code != 0 and len(r.err_lines()) == 1, f"{r.code}: {r.err}")
        c.check("nothing written there", not os.path.exists(os.path.join(target, "out")), "written")

    # Two backups at once into one home.
    c, d = new("two backups at once")
    home = os.path.join(d, "home")
    s1, s2 = tree(d, "one"), tree(d, "two")
    earlier(c, home, d)
    cmd = lambda s: [a.bin, "--home", home, "--json", "backup", s]
    p1 = subprocess.Popen(cmd(s1), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p2 = subprocess.Popen(cmd(s2), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for p, name in ((p1, "one"), (p2, "two")):
        try:
            so, se = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            so, se = p.communicate()
            c.check(f"backup {name} no hang", False, "timed out")
            continue
        r = Result(p.returncode, so, se)
        c.sane(f"backup {name}", r)
        c.check(f"backup {name} ends ok or says why in one line", r.code == 0 or len(r.err_lines()) == 1, r.err)
        job = (r.doc() or {}).get("job_id")
        if r.code == 0 and job:
            out_dir = os.path.join(d, f"out-{name}")
            rr = tl(a, home, "restore", job, "--to", out_dir)
            compare_restore(c, f"restore of {name}", rr, files_of(os.path.join(d, name)), out_dir)
    still_verifies(c, home)

    # Options at their bounds.
    c, d = new("options at their bounds")
    home = os.path.join(d, "home")
    s = os.path.join(d, "src")
    os.makedirs(s)
    for opt, vals in (("--block-size", ("0", "1", "-1", "99999999999999999999", "16E")),
                      ("--buffers", ("0", "-1", "99999999999999999999")),
                      ("--concurrency", ("0", "-1", "99999999999999999999")),
                      ("--extent-size", ("0", "16E")),
                      ("--readers-per-stream", ("0", "99999999999999999999"))):
        for v in vals:
            r = tl(a, home, "backup", s, opt, v, timeout=30)
            c.sane(f"backup {opt} {v}", r)
            c.check(f"backup {opt} {v}: exit 1 or 2 in one line", r.code in (1, 2) and len(r.err_lines()) == 1,
                    f"{r.code}: {r.err[-200:]}")

    # A closed standard output and a pipe closed early.
    c, d = new("a closed standard output")
    home = os.path.join(d, "home")
    s = tree(d)
    r = tl(a, home, "backup", s)
    c.check("backup", r.code == 0, r.err)
    for args in (("ls", "1"), ("jobs",)):
        p = subprocess.run(f'"{a.bin}" --home "{home}" {" ".join(args)} >&-', shell=True, capture_output=True,
                           text=True, timeout=TIMEOUT)
        r = Result(p.returncode, p.stdout, p.stderr)
        c.sane(f"{args[0]} >&-", r)
        c.check(f"{args[0]} >&- says so in one line or stays quiet", len(r.err_lines()) <= 1, r.err)
        p = subprocess.run(f'"{a.bin}" --home "{home}" {" ".join(args)} | head -c 1 >/dev/null', shell=True,
                           capture_output=True, text=True, timeout=TIMEOUT)
        c.check(f"{args[0]} | head: no panic", "panicked" not in p.stderr, p.stderr)
    still_verifies(c, home)
    return out


# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-hostile")
    ap.add_argument("--quick", action="store_true", help="fewer hostile values per field")
    ap.add_argument("--only", default="tapes,cli")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    cases = []
    parts = a.only.split(",")
    if "tapes" in parts:
        w = os.path.join(a.work, "tapes")
        os.makedirs(w)
        cases += part_tapes(a, w)
    if "cli" in parts:
        w = os.path.join(a.work, "cli")
        os.makedirs(w)
        cases += cli_cases(a, w)
    docs = [c.doc() for c in cases]
    failed = [d for d in docs if d["failed"]]
    totals = {
        "cases": len(docs),
        "checks": sum(d["checks"] for d in docs),
        "passed": len(docs) - len(failed),
        "failed": len(failed),
        "failed_checks": sum(len(d["failed"]) for d in docs),
        "seconds": round(time.monotonic() - T0, 1),
    }
    print(json.dumps({"totals": totals, "pass": not failed, "failures": failed, "cases": docs}, indent=1))
    shutil.rmtree(a.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
