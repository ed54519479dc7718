#!/usr/bin/env python3
"""The planner checked against the emulation: ten scenarios, each planned with
`tapeloom plan` and run on the modeled library, with the plan's error on each
figure. One JSON document on stdout.

Every scenario runs in a fresh home under --work, on a library made with
`library create --model lto3 --clock real --scale 0.25` (LTO-3 at a quarter of
its rates and buffers: 20 MB/s native, a lowest speed step of 6.75 MB/s, 2:1
data taken at up to 40 MB/s). The sources are generator sources
(`gen:PRESET:SIZE:SEED`, 2:1 data made in memory), each held to its rate with
`--limit-rate`, so a source's rate is exactly what the plan is told. The plan
gets the same sources (`--source SIZE@RATE`), the model and scale, `--ratio 2`,
the drives, the concurrency and the stage.

Compared, where the scenario has them: the window (the backup's `seconds`
against the plan's `window_seconds`), each drive's data rate (its bytes over its
data span, against the plan's drive `mb_per_s`), the stage's peak (the largest
`stage` sample against `stage_peak_bytes`), the backhitches (within 1, or 10%
over 10), and the one-file restore from an unloaded cartridge (the restore's
modeled seconds against the plan's `one_file_seconds`, with `--restore-at` the
file's place on tape). Pass: every figure within 5%.

  python3 bench/plan.py
  python3 bench/plan.py --only fast1,slow1
"""
import argparse, json, os, shutil, sqlite3, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Fail, log, tapeloom_ok, REPO  # noqa: E402

MB = 1_000_000
MODEL = ["--model", "lto3", "--scale", "0.25"]

# name: (streams as (preset, bytes, rate), drives, concurrency, stage, what to restore)
SCENARIOS = {
    "fast1": ([("hp-typical", 768 * MB, 60 * MB)], 1, "auto", None, None),
    "above1": ([("hp-typical", 384 * MB, 20 * MB)], 1, "auto", None, None),
    "slow1": ([("hp-typical", 160 * MB, 8 * MB)], 1, "auto", None, None),
    "weave4": ([("hp-typical", 128 * MB, 8 * MB)] * 4, 1, "auto", None, None),
    "fixed2": ([("hp-typical", 96 * MB, 8 * MB)] * 4, 1, "2", None, None),
    "twodrives": ([("hp-typical", 128 * MB, 8 * MB)] * 8, 2, "auto", None, None),
    "staged": ([("hp-typical", 192 * MB, 8 * MB)], 1, "auto", 256 << 20, None),
    "smallfiles": ([("small-files", 256 * MB, 24 * MB)], 1, "auto", None, None),
    "restore1": ([("hp-typical", 768 * MB, 60 * MB)], 1, "auto", None, "file"),
    "restorestream": ([("hp-typical", 128 * MB, 8 * MB)] * 4, 1, "auto", None, "stream"),
}


def err(plan, emul):
    if plan is None or emul is None or emul == 0:
        return None
    return round((plan - emul) / emul, 4)


def within(plan, emul, share=0.05):
    e = err(plan, emul)
    return e is not None and abs(e) <= share


def hitches_ok(plan, emul):
    return abs(plan - emul) <= 1 or (emul > 10 and abs(plan - emul) <= 0.1 * emul)


def stage_peak(home, job):
    db = sqlite3.connect(os.path.join(home, "catalog.sqlite"))
    row = db.execute("SELECT MAX(bytes) FROM samples WHERE job_id = ? AND series = 'stage'",
                     (job,)).fetchone()
    db.close()
    return row[0] if row and row[0] is not None else None


def scenario(a, name):
    streams, drives, conc, stage, restore = SCENARIOS[name]
    home = os.path.join(a.work, name)
    shutil.rmtree(home, ignore_errors=True)
    tapeloom_ok(a.bin, home, ["library", "create", "--drives", max(drives, 1), "--slots", 4,
                              "--capacity", "4G", *MODEL, "--clock", "real"])
    sources = [f"gen:{p}:{b}:{i + 1}" for i, (p, b, _) in enumerate(streams)]
    rate = streams[0][2]
    extra = []
    if stage:
        tapeloom_ok(a.bin, home, ["stage", "add", os.path.join(home, "stage"), "--size", stage])
        extra = ["--via", "stage"]
    log(f"{name}: backup of {len(sources)} stream(s) at {rate / MB:g} MB/s on {drives} drive(s)")
    job = tapeloom_ok(a.bin, home, ["backup", "--drives", drives, "--concurrency", conc,
                                    "--limit-rate", rate, *extra, *sources], timeout=3600)
    plan_args = ["plan", *MODEL, "--ratio", 2, "--drives", drives, "--concurrency", conc]
    # Each source's size as the generator made it (it stays under the total asked
    # for by up to a file), as `readrate` would measure it.
    made = {s["name"]: s["bytes"] for s in job["streams"]}
    for src, (p, b, r) in zip(sources, streams):
        plan_args += ["--source", f"{made.get(src, b)}@{r}"]
    if stage:
        plan_args += ["--stage", stage]
    out = {"streams": len(streams), "drives": drives, "concurrency": conc, "stage": stage}
    checks = []
    if restore:
        tapeloom_ok(a.bin, home, ["library", "unload"])
        out["restore"], args, check = restore_case(a, home, job, restore)
        plan_args += args
        checks.append(check)
    plan = tapeloom_ok(a.bin, home, plan_args)
    out["plan_seconds"] = round(plan["plan_seconds"], 4)
    em_drives = sorted(job["drives"], key=lambda d: d["drive"])
    out["window"] = {"emulated_s": round(job["seconds"], 2),
                     "planned_s": round(plan["window_seconds"], 2),
                     "error": err(plan["window_seconds"], job["seconds"])}
    checks.append(within(plan["window_seconds"], job["seconds"]))
    out["drives_compared"] = []
    for d, p in zip(em_drives, plan["drives"]):
        span = d.get("data_span_mb_per_s") or d["mb_per_s"]
        row = {"drive": d["drive"], "emulated_mb_per_s": round(span, 2),
               "planned_mb_per_s": round(p["mb_per_s"], 2), "rate_error": err(p["mb_per_s"], span),
               "emulated_backhitches": d["backhitches"], "planned_backhitches": p["backhitches"]}
        row["pass"] = within(p["mb_per_s"], span) and hitches_ok(p["backhitches"], d["backhitches"])
        checks.append(row["pass"])
        out["drives_compared"].append(row)
    if stage:
        peak = stage_peak(home, job["job_id"])
        out["stage_peak"] = {"emulated_bytes": peak, "planned_bytes": plan["stage_peak_bytes"],
                             "error": err(plan["stage_peak_bytes"], peak)}
        checks.append(within(plan["stage_peak_bytes"], peak))
    if restore == "file":
        r = out["restore"]
        r["planned_s"] = round(plan["restore"]["one_file_seconds"], 2)
        r["error"] = err(plan["restore"]["one_file_seconds"], r["emulated_s"])
        checks[0] = within(plan["restore"]["one_file_seconds"], r["emulated_s"])
    if restore == "stream":
        r = out["restore"]
        r["planned_s"] = round(plan["restore"]["one_stream_seconds"], 2)
        r["error"] = err(plan["restore"]["one_stream_seconds"], r["emulated_s"])
        checks[0] = within(plan["restore"]["one_stream_seconds"], r["emulated_s"])
    out["pass"] = all(checks)
    log(f"{name}: pass={out['pass']} window {out['window']}")
    shutil.rmtree(home, ignore_errors=True)
    return out


def restore_case(a, home, job, what):
    """Restores one file (the last of the job) or one stream from the unloaded
    cartridge: (figures, plan arguments, placeholder check)."""
    jid = str(job["job_id"])
    dest = os.path.join(home, "restored")
    if what == "file":
        ls = tapeloom_ok(a.bin, home, ["ls", jid])
        files = [e for e in ls["entries"] if e.get("type") == "file"]
        last = max(files, key=lambda e: e.get("block") or 0)
        r = tapeloom_ok(a.bin, home, ["restore", jid, "--to", dest, last["path"]])
        # Where the file lies on tape: its block, each block taking half its
        # length there (2:1 data).
        at = int(last["block"] * 256 * 1024 / 2)
        return ({"path": last["path"], "block": last["block"], "restore_at": at,
                 "emulated_s": round(r["modeled_seconds"], 2)}, ["--restore-at", at], None)
    name = job["streams"][0]["name"]
    r = tapeloom_ok(a.bin, home, ["restore", jid, "--to", dest, "--stream", name])
    return ({"stream": name, "emulated_s": round(r["modeled_seconds"], 2)}, [], None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-plan-bench")
    ap.add_argument("--only", default=",".join(SCENARIOS))
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    os.makedirs(a.work, exist_ok=True)
    out = {"benchmark": "plan", "library": "lto3, scale 0.25, real clock"}
    t0 = time.monotonic()
    names = a.only.split(",")
    for n in names:
        if n not in SCENARIOS:
            sys.exit(f"no scenario {n} (scenarios: {', '.join(SCENARIOS)})")
        try:
            out[n] = scenario(a, n)
        except Fail as e:
            out[n] = {"error": str(e), "pass": False}
    out["passed"] = sum(1 for n in names if out[n].get("pass"))
    out["pass"] = out["passed"] == len(names)
    out["seconds"] = round(time.monotonic() - t0, 1)
    shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
