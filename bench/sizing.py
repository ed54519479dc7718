#!/usr/bin/env python3
"""Sizing answered and checked: how many drives for a 20 TB night of mixed
sources in 8 hours? One JSON document on stdout.

The night: 10 sources of 1.5 TB that read at 150 MB/s and 10 of 0.5 TB that read
at 50 MB/s (2:1 data), onto LTO-6 drives. `tapeloom plan --solve drives` gives
the drive count N for the whole night.

The same night is then emulated at 1/250 of its bytes (a scale that fits this
machine): the same sources at the same rates, 1/250 of their size, and a window
of 1/250 of the 8 hours' data time plus the drives' load. The planner is asked
again for that night, which must give the same N. The emulation runs on a
library of LTO-6 models at scale 1 on the real clock that keeps no payload, with
generator sources that read at their rates (`gen:hp-typical:SIZE:SEED@RATE`):
once with N drives and once with N - 1. Pass: the planner says N for both
nights, the backup on N drives fits the window, and the one on N - 1 does not.

  python3 bench/sizing.py
"""
import argparse, json, os, shutil, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Fail, log, tapeloom_ok, REPO  # noqa: E402

MODEL = "lto6"
WINDOW = 8 * 3600
LOAD = 17.0
FRACTION = 250
# (count, bytes, rate) of the whole night.
NIGHT = [(10, 1_500_000_000_000, 150_000_000), (10, 500_000_000_000, 50_000_000)]


def plan_args(night, window):
    args = ["plan", "--model", MODEL, "--ratio", 2, "--window", f"{window:.0f}s",
            "--solve", "drives"]
    for count, size, rate in night:
        args += ["--source", f"{size}@{rate}x{count}"]
    return args


def emulate(a, night, drives, window):
    home = os.path.join(a.work, f"drives{drives}")
    shutil.rmtree(home, ignore_errors=True)
    tapeloom_ok(a.bin, home, ["library", "create", "--drives", drives, "--slots", drives + 2,
                              "--capacity", "3T", "--model", MODEL, "--clock", "real",
                              "--payload", "none"])
    sources, seed = [], 1
    for count, size, rate in night:
        for _ in range(count):
            sources.append(f"gen:hp-typical:{size}:{seed}@{rate}")
            seed += 1
    log(f"emulating {len(sources)} sources on {drives} {MODEL} drive(s), window {window:.1f} s")
    t = time.monotonic()
    job = tapeloom_ok(a.bin, home, ["backup", "--drives", drives, *sources], timeout=3600)
    wall = time.monotonic() - t
    shutil.rmtree(home, ignore_errors=True)
    return {"drives": drives, "seconds": round(job["seconds"], 1), "wall_seconds": round(wall, 1),
            "bytes": job["bytes"], "fits": job["seconds"] <= window,
            "per_drive_mb_per_s": [round(d["mb_per_s"], 1) for d in job["drives"]],
            "backhitches": [d["backhitches"] for d in job["drives"]]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-sizing-bench")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    os.makedirs(a.work, exist_ok=True)
    out = {"benchmark": "sizing", "model": MODEL, "night_bytes": sum(c * s for c, s, _ in NIGHT),
           "window_seconds": WINDOW, "fraction": FRACTION}
    t0 = time.monotonic()
    try:
        full = tapeloom_ok(a.bin, a.work, plan_args(NIGHT, WINDOW))
        n = full["answer"]
        out["plan"] = {"drives": n, "window_seconds": round(full["window_seconds"], 1),
                       "verdict": full["verdict"], "plan_seconds": full["plan_seconds"]}
        small = [(c, s // FRACTION, r) for c, s, r in NIGHT]
        window = (WINDOW - LOAD) / FRACTION + LOAD
        scaled = tapeloom_ok(a.bin, a.work, plan_args(small, window))
        out["scaled"] = {"window_seconds": round(window, 1), "drives": scaled["answer"],
                         "planned_seconds": round(scaled["window_seconds"], 1)}
        if not n or n < 2:
            raise Fail(f"the plan's answer {n} leaves no smaller count to try")
        out["with_n"] = emulate(a, small, n, window)
        out["with_n_minus_1"] = emulate(a, small, n - 1, window)
        out["pass"] = bool(scaled["answer"] == n and out["with_n"]["fits"]
                           and not out["with_n_minus_1"]["fits"])
    except Fail as e:
        out["error"] = str(e)
        out["pass"] = False
    out["seconds"] = round(time.monotonic() - t0, 1)
    shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
