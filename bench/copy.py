#!/usr/bin/env python3
"""Copies of a job (`tapeloom copy`), as one JSON document.

Each experiment runs in a fresh home under --work whose library is
`tapeloom library create --model lto3 --clock real --scale 0.25` (LTO-3 at a
quarter of its rates and buffers, taking real time) with pools `main` and
`vault`. One job of --size (2G) of incompressible data is backed up to `main`
and copied to `vault`.

  twodrives  Two drives: one reads the job while the other writes the copy.
             Pass: each drive ran at 0.9 or more of its model's top rate for
             the data (bytes over the seconds its tape moved), 0 backhitches on
             the writing drive while the data flowed (the flush at the end stops
             the tape, as every flush does, and is counted apart), and `restore --copy 2` identical. The copy's
             rate over its wall time (loads included) is given beside it.
  onedrive   One drive: each segment goes through a spool file in the home.
             Pass: the copy restores identical with --copy 2, and the spool's
             peak is reported (it holds one segment of the job at most).

  python3 bench/copy.py --quick
  python3 bench/copy.py --only twodrives > out.json
"""
import argparse, json, os, shutil, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Bench, Fail, log, parse_size, same_tree, REPO  # noqa: E402

EXPERIMENTS = ["twodrives", "onedrive"]


def source(b):
    """One folder with --size of random data in 64 MiB files (made once)."""
    src = os.path.join(b.work, "src")
    if not os.path.isdir(src):
        os.makedirs(src)
        left, n = b.a.size, 0
        while left > 0:
            chunk = min(left, 64 << 20)
            with open(os.path.join(src, f"f{n:04}"), "wb") as f:
                f.write(os.urandom(chunk))
            left -= chunk
            n += 1
    return src


def copied_home(b, name, drives):
    h = b.home(name, drives=drives)
    b.tl(h, "pool", "create", "main")
    b.tl(h, "pool", "create", "vault")
    _, job, _ = b.tl(h, "backup", source(b), "--pool", "main")
    if job.get("status") != "ok":
        raise Fail(f"backup ended {job.get('status')}")
    dt, c, _ = b.tl(h, "copy", str(job["job_id"]), "--to-pool", "vault")
    return h, job, c["copies"][0], dt


def restored_identical(b, h, job_id, name):
    out = b.path(f"restore-{name}")
    _, r, _ = b.tl(h, "restore", str(job_id), "--copy", "2", "--to", out)
    same = same_tree(source(b), out)
    shutil.rmtree(out, ignore_errors=True)
    return r.get("copy"), same


def share(d):
    top = d.get("top_mb_per_s") or 0
    return round(d["mb_per_s"] / top, 3) if top else None


def twodrives(b):
    h, job, c, wall = copied_home(b, "two", 2)
    rd, wd = c.get("read_drive") or {}, c.get("write_drive") or {}
    top = wd.get("top_mb_per_s") or 0
    wall_rate = c["bytes"] / c["seconds"] / 1e6
    copy_no, same = restored_identical(b, h, job["job_id"], "two")
    res = {"job_bytes": c["bytes"], "blocks": c["blocks"], "copy_seconds": round(c["seconds"], 2),
           "command_seconds": round(wall, 2), "drives": c["drives"],
           "read_drive": rd, "write_drive": wd,
           "read_share_of_top": share(rd), "write_share_of_top": share(wd),
           "wall_mb_per_s": round(wall_rate, 2),
           "wall_share_of_top": round(wall_rate / top, 3) if top else None,
           "restore_copy": copy_no, "identical": same}
    res["pass"] = bool(same and copy_no == 2 and wd.get("backhitches_while_data") == 0
                       and (share(rd) or 0) >= 0.9 and (share(wd) or 0) >= 0.9)
    return res


def onedrive(b):
    h, job, c, wall = copied_home(b, "one", 1)
    copy_no, same = restored_identical(b, h, job["job_id"], "one")
    res = {"job_bytes": c["bytes"], "copy_seconds": round(c["seconds"], 2),
           "command_seconds": round(wall, 2), "drives": c["drives"],
           "spool_peak_bytes": c.get("spool_peak_bytes"),
           "write_drive": c.get("write_drive"), "restore_copy": copy_no, "identical": same}
    res["pass"] = bool(same and copy_no == 2 and (c.get("spool_peak_bytes") or 0) > 0)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-copy-bench")
    ap.add_argument("--only", default=",".join(EXPERIMENTS))
    ap.add_argument("--quick", action="store_true", help="a 256 MiB job: a few minutes")
    ap.add_argument("--size", type=parse_size, default=parse_size("2G"))
    ap.add_argument("--model", default="lto3")
    ap.add_argument("--scale", default="0.25")
    a = ap.parse_args()
    if a.quick:
        a.size = parse_size("256M")
    a.bin = os.path.abspath(a.bin)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    b = Bench(a, a.work)
    out = {"benchmark": "copy", "settings": {"model": a.model, "scale": a.scale, "clock": "real",
                                              "size": a.size}}
    for name in a.only.split(","):
        try:
            out[name] = globals()[name](b)
        except Fail as e:
            out[name] = {"error": str(e), "pass": False}
        log(f"{name}: pass={out[name].get('pass')}")
    shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
