#!/usr/bin/env python3
"""The tape life cycle after a backup (docs/COPIES.md), as one JSON document.

Each case runs in a fresh home under --work with a virtual library of 2 drives,
8 slots of 256M and 4 mail slots, pools `main` and `vault`, one job of --size
(64M) of random files in `main`, copied to `vault` with `tapeloom copy`. The
binary must read TAPELOOM_FAULTS (build it with --features tapeloom/test-hooks).

  lost      The job's own cartridge is exported (outside the library, as a lost
            one is): a restore of the whole job and of one file read copy 2 and
            are identical.
  blocks    20 blocks of the job's own cartridge unreadable (TAPELOOM_FAULTS
            read-error at 20 LBNs): the restore reads exactly those 20 from copy
            2 and is identical.
  offsite   The copy pool's cartridges exported: `restore --copy 2` refused in
            one line naming the cartridge, then `library import` and the same
            restore identical.
  readback  A byte of one block of the job's own cartridge flipped on the virtual
            tape: `verify --pool main` finds the bad block and marks the
            cartridge suspect; the next restore reads copy 2 and is identical.

  python3 bench/lifecycle.py
  python3 bench/lifecycle.py --only lost,blocks
"""
import argparse, filecmp, json, os, random, shutil, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Fail, log, parse_size, same_tree, REPO  # noqa: E402

CASES = ["lost", "blocks", "offsite", "readback"]


def tl(a, home, args, faults=None):
    """One command with --json: (exit code, JSON or None, stderr)."""
    env = dict(os.environ)
    env.pop("TAPELOOM_FAULTS", None)
    if faults:
        env["TAPELOOM_FAULTS"] = faults
    p = subprocess.run([a.bin, "--home", home, "--json", *map(str, args)], capture_output=True,
                       text=True, errors="replace", env=env, timeout=1200)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = None
    return p.returncode, doc, p.stderr.strip()


def ok(a, home, args, faults=None):
    code, doc, err = tl(a, home, args, faults)
    if code != 0:
        raise Fail(f"{args[0]} failed ({code}): {err[-300:]}")
    return doc


def source(a):
    src = os.path.join(a.work, "src")
    if not os.path.isdir(src):
        os.makedirs(os.path.join(src, "sub"))
        rnd = random.Random(1)
        left, n = a.size, 0
        while left > 0:
            size = min(left, rnd.randint(1 << 10, 8 << 20))
            with open(os.path.join(src, "sub" if n % 3 else "", f"f{n:04}"), "wb") as f:
                f.write(rnd.randbytes(size))
            left -= size
            n += 1
    return src


def copied(a, name):
    """A home with the job in `main` and its copy 2 in `vault`: (home, job, tape, copy tape)."""
    home = os.path.join(a.work, f"home-{name}")
    ok(a, home, ["library", "create", "--drives", 2, "--slots", 8, "--capacity", "256M",
                 "--mail-slots", 4])
    ok(a, home, ["pool", "create", "main"])
    ok(a, home, ["pool", "create", "vault"])
    b = ok(a, home, ["backup", source(a), "--pool", "main"])
    c = ok(a, home, ["copy", b["job_id"], "--to-pool", "vault"])["copies"][0]
    return home, b, b["volumes"][0], c["cartridges"][0], c


def restored(a, home, job, name, extra=(), faults=None):
    out = os.path.join(a.work, f"out-{name}")
    shutil.rmtree(out, ignore_errors=True)
    r = ok(a, home, ["restore", job, "--to", out, *extra], faults)
    return r, out


def one_file(src):
    for root, _, files in os.walk(src):
        for f in sorted(files):
            return os.path.relpath(os.path.join(root, f), src)
    raise Fail("the source is empty")


def lost(a):
    home, b, tape, _, _ = copied(a, "lost")
    ok(a, home, ["library", "export", tape])
    r, out = restored(a, home, b["job_id"], "lost-whole")
    whole = same_tree(source(a), out)
    rel = one_file(source(a))
    r1, out1 = restored(a, home, b["job_id"], "lost-one", [rel])
    one = filecmp.cmp(os.path.join(source(a), rel), os.path.join(out1, rel), shallow=False)
    res = {"exported": tape, "whole": {"copy": r["copy"], "files": r["files"], "identical": whole},
           "one_file": {"path": rel, "copy": r1["copy"], "blocks_read": r1["blocks_read"],
                        "identical": one}}
    res["pass"] = bool(whole and one and r["copy"] == 2 and r1["copy"] == 2)
    return res


def blocks(a):
    home, b, tape, _, _ = copied(a, "blocks")
    n = b["blocks"]
    lbns = sorted(random.Random(2).sample(range(3, 2 + n - 2), 20))
    spec = ";".join(f"read-error@lbn={l},barcode={tape}" for l in lbns)
    r, out = restored(a, home, b["job_id"], "blocks", faults=spec)
    same = same_tree(source(a), out)
    res = {"unreadable_lbns": lbns, "copy": r["copy"], "from_other_copy": r["from_other_copy"],
           "errors": len(r["errors"]), "blocks_read": r["blocks_read"], "identical": same}
    res["pass"] = bool(same and r["from_other_copy"] == 20 and not r["errors"])
    return res


def offsite(a):
    home, b, _, copy_tape, _ = copied(a, "offsite")
    ok(a, home, ["library", "export", copy_tape])
    out = os.path.join(a.work, "out-offsite-refused")
    code, _, err = tl(a, home, ["restore", b["job_id"], "--copy", 2, "--to", out])
    lines = [l for l in err.splitlines() if l.strip()]
    imp = ok(a, home, ["library", "import", copy_tape])
    r, out = restored(a, home, b["job_id"], "offsite", ["--copy", 2])
    same = same_tree(source(a), out)
    res = {"exported": copy_tape, "refused_exit": code, "refusal": lines,
           "imported": [c.get("barcode") for c in imp.get("cartridges", [])],
           "copy": r["copy"], "identical": same}
    res["pass"] = bool(code != 0 and len(lines) == 1 and copy_tape in lines[0] and same
                       and r["copy"] == 2)
    return res


def flip(home, barcode, lbn):
    """Flips a payload byte of block `lbn` of the virtual cartridge `barcode`."""
    tapes = os.path.join(home, "library", "tapes")
    with open(os.path.join(tapes, f"{barcode}.idx"), "rb") as f:
        f.seek(lbn * 16)
        e = f.read(16)
    off, length = int.from_bytes(e[:8], "little"), int.from_bytes(e[8:12], "little")
    if length < 2000:
        raise Fail(f"block {lbn} of {barcode} is too short to damage")
    with open(os.path.join(tapes, f"{barcode}.data"), "r+b") as f:
        f.seek(off + 64 + 1000)
        byte = f.read(1)
        f.seek(off + 64 + 1000)
        f.write(bytes([byte[0] ^ 0x40]))


def readback(a):
    home, b, tape, _, _ = copied(a, "readback")
    lbn = 2 + b["blocks"] // 2
    flip(home, tape, lbn)
    code, v, err = tl(a, home, ["verify", "--pool", "main"])
    status = ok(a, home, ["library", "status"])
    state = next((c.get("state") or c.get("status") for c in status.get("cartridges", [])
                  if c.get("barcode") == tape), None)
    r, out = restored(a, home, b["job_id"], "readback")
    same = same_tree(source(a), out)
    job = (v or {}).get("jobs", [{}])[0]
    res = {"flipped": {"cartridge": tape, "block": lbn}, "verify_exit": code,
           "verify": {k: job.get(k) for k in ("job_id", "ok", "bad_blocks", "blocks")},
           "cartridge_state": state, "restore_copy": r["copy"],
           "restore_from_other_copy": r["from_other_copy"], "identical": same}
    res["pass"] = bool(code != 0 and len(job.get("bad_blocks") or []) == 1 and state == "suspect"
                       and r["copy"] == 2 and same)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-lifecycle-bench")
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--size", type=parse_size, default=parse_size("64M"))
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    code, _, _ = tl(a, os.path.join(a.work, "probe"), ["library", "status"], "no-such-fault")
    if code == 0:
        sys.exit(f"{a.bin} ignores TAPELOOM_FAULTS: build it with "
                 "cargo build --release --features tapeloom/test-hooks")
    out = {"benchmark": "lifecycle", "settings": {"size": a.size}}
    t0 = time.monotonic()
    for name in a.only.split(","):
        try:
            out[name] = globals()[name](a)
        except Fail as e:
            out[name] = {"error": str(e), "pass": False}
        log(f"{name}: pass={out[name].get('pass')}")
    out["seconds"] = round(time.monotonic() - t0, 1)
    shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
