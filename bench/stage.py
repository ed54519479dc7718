#!/usr/bin/env python3
"""Backups through the disk stage (disk to disk to tape), as one JSON document.

Every experiment runs in a fresh home under --work whose library is
`tapeloom library create --model lto3 --clock real --scale 0.25` (LTO-3 at a quarter
of its rates and buffers, taking real time), with a stage of --stage-size (4G) added
by `tapeloom stage add`, unless said. Sources come from
`tapeloom gen --preset hp-typical`, one folder per stream (see bench/engine.py).

  slow4      Four streams limited to 1.5 MB/s each (6 MB/s together, below the
             drive's lowest speed step), --via direct, then --via stage with
             --despool early and with the default --despool whole. Pass: direct shows
             backhitches; through the stage, in both orders, the drive has 0
             backhitches and writes at >= 95% of its top rate for the data while it
             despools; with --despool early the job's data ends no later than 10% of
             the despool time after the last source ends (whole runs cannot: the
             figure is printed).
  restore1   Four streams of 8 MB/s each through the stage; each of them restored with
             --stream, against the same stream backed up alone (direct) and restored,
             and against the same four streams woven direct. Rates are over the
             modeled seconds from the stream's first block on (the travel to where a
             stream starts is given apart). Pass: through the stage >= 0.9 x alone,
             for the slowest of the four.
  sixteen    Sixteen streams of 2 MB/s each through the stage. Pass: 0 backhitches,
             each stream on tape in one extent (counted in the catalog).
  small      A job of --small-job (1G) through a stage of --small-stage (256M), sources
             unlimited. The stage folder is measured from outside every 0.1 s. Pass:
             the job completes, verifies and restores identical, the stage never holds
             more than its size, and spooling waited (stage_waits).

  python3 bench/stage.py --quick
  python3 bench/stage.py --only slow4,sixteen > out.json
"""
import argparse, json, os, shutil, sqlite3, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Bench, Fail, log, mbps, parse_size, same_tree, REPO  # noqa: E402

EXPERIMENTS = ["slow4", "restore1", "sixteen", "small"]


def staged_home(b, name, stage_size=None):
    h = b.home(name)
    b.tl(h, "stage", "add", os.path.join(h, "..", os.path.basename(h) + "-stage"),
         "--size", stage_size or b.a.stage_size)
    return h


def drive_figures(job):
    d = job["drives"][0]
    return {k: d.get(k) for k in ("backhitches", "despool_mb_per_s", "despool_max_mb_per_s",
                                  "despool_seconds", "streaming_speed_share", "mb_per_s",
                                  "utilization")}


def extents_per_stream(home, job_id):
    db = sqlite3.connect(os.path.join(home, "catalog.sqlite"))
    try:
        rows = db.execute("SELECT stream, COUNT(*) FROM extents WHERE job_id = ? AND stream > 0 "
                          "GROUP BY stream", (job_id,)).fetchall()
    finally:
        db.close()
    return {str(s): n for s, n in rows}


def slow4_staged(b, srcs, rate, order):
    h = staged_home(b, f"slow4-stage-{order}")
    _, job, _ = b.tl(h, "backup", "--limit-rate", rate, "--via", "stage", "--despool", order, *srcs)
    d = drive_figures(job)
    last_source = max(s["spool_seconds_end"] for s in spool_ends(job))
    # The data's end: the job's start plus its mount (seconds - data_seconds covers the
    # load before and the index and flush after; the model's flush is the drive's
    # buffer going to tape) is not known apart, so both ends are given.
    res = {"despool": job.get("despool"), "seconds": round(job["seconds"], 2),
           "data_seconds": round(job["data_seconds"], 2),
           "last_source_end_s": round(last_source, 2), **d,
           "extents_per_stream": extents_per_stream(h, job["job_id"]),
           "streams": [{k: s.get(k) for k in ("name", "bytes", "spool_mb_per_s", "seconds")}
                       for s in job["streams"]]}
    despool = d["despool_seconds"] or 0
    last_block = max(s["seconds"] for s in job["streams"])
    res["last_block_s"] = round(last_block, 2)
    res["data_end_after_sources_s"] = round(last_block - last_source, 2)
    res["data_end_after_sources_share_of_despool"] = (
        round((last_block - last_source) / despool, 3) if despool else None)
    res["job_end_after_sources_s"] = round(job["seconds"] - last_source, 2)
    rate_share = (d["despool_mb_per_s"] / d["despool_max_mb_per_s"]
                  if d["despool_mb_per_s"] and d["despool_max_mb_per_s"] else None)
    res["despool_share_of_max"] = round(rate_share, 3) if rate_share else None
    res["streaming"] = bool(d["backhitches"] == 0 and rate_share and rate_share >= 0.95)
    res["ends_soon"] = bool(last_block - last_source <= 0.1 * despool)
    return res


def slow4(b):
    """Direct, then through the stage with each despool order. `--despool early` is
    the order that ends soon after the sources; the default, whole, lays each stream
    down in one run and so cannot end before (n-1)/n of the despool time after four
    sources that end together (see `DespoolOrder` in the engine)."""
    rate = "1.5MB"
    srcs = b.streams(4)
    res = {"limit_rate_each": rate}
    log("slow4: direct")
    h = b.home("slow4-direct")
    _, direct, _ = b.tl(h, "backup", "--limit-rate", rate, "--via", "direct", *srcs)
    res["direct"] = {"seconds": round(direct["seconds"], 2), **drive_figures(direct)}
    for order in ("early", "whole"):
        log(f"slow4: through the stage, --despool {order}")
        res[f"stage_{order}"] = slow4_staged(b, srcs, rate, order)
    early, whole = res["stage_early"], res["stage_whole"]
    res["pass"] = bool((res["direct"]["backhitches"] or 0) > 0 and early["streaming"]
                       and early["ends_soon"] and whole["streaming"])
    return res


def spool_ends(job):
    """Each stream's end on the stage, in seconds from the job's start."""
    out = []
    for s in job["streams"]:
        if s.get("spool_seconds") is None:
            raise Fail(f"stream {s['name']} has no spool figures: was the job staged?")
        out.append({"name": s["name"], "spool_seconds_end": s["spool_seconds"]})
    return out


def restore_one(b, home, job_id, name):
    to = b.path(f"restore-{os.path.basename(home)}-{name}")
    _, r, _ = b.tl(home, "restore", job_id, "--stream", name, "--to", to)
    secs = r.get("modeled_seconds") or r["seconds"]
    first = r.get("first_block_seconds")
    out = {"seconds": round(secs, 2), "bytes": r["bytes"], "mb_per_s": mbps(r["bytes"], secs),
           "source": r.get("source", "tape")}
    if first is not None:
        out["first_block_seconds"] = round(first, 2)
        out["data_mb_per_s"] = mbps(r["bytes"], secs - first)
    shutil.rmtree(to, ignore_errors=True)
    return out


def restore1(b):
    """Each of the four streams restored from the staged job, from the direct job, and
    from a tape that holds it alone. Two rates per restore: over all its modeled
    seconds (mount and the travel to the stream included: a stream written fourth
    starts further along the tape than one written alone), and over the seconds from
    its first block on (the reading itself, which is what interleaving slows). The pass
    takes the second, for the slowest of the four streams."""
    rate = "8MB"
    srcs = b.streams(4)
    names = [os.path.basename(s) for s in srcs]
    log("restore1: four streams through the stage")
    h = staged_home(b, "restore1-stage")
    _, job, _ = b.tl(h, "backup", "--limit-rate", rate, "--via", "stage", *srcs)
    res = {"despool": job.get("despool"), "staged_extents": extents_per_stream(h, job["job_id"]),
           "streams": {}}
    staged = {n: restore_one(b, h, job["job_id"], n) for n in names}
    log("restore1: four streams woven direct")
    h = b.home("restore1-direct")
    _, woven, _ = b.tl(h, "backup", "--limit-rate", rate, "--via", "direct", *srcs)
    direct = {n: restore_one(b, h, woven["job_id"], n) for n in names}
    for src, n in zip(srcs, names):
        log(f"restore1: {n} alone")
        h = b.home(f"restore1-alone-{n}")
        _, solo, _ = b.tl(h, "backup", "--limit-rate", rate, "--concurrency", 1, src)
        alone = restore_one(b, h, solo["job_id"], n)
        row = {"staged": staged[n], "direct": direct[n], "alone": alone}
        for k in ("staged", "direct"):
            row[f"{k}_vs_alone"] = round(row[k]["mb_per_s"] / alone["mb_per_s"], 3)
            if "data_mb_per_s" in row[k] and alone.get("data_mb_per_s"):
                row[f"{k}_data_vs_alone"] = round(row[k]["data_mb_per_s"] / alone["data_mb_per_s"], 3)
        res["streams"][n] = row
    rows = res["streams"].values()
    res["staged_data_vs_alone_min"] = min(r.get("staged_data_vs_alone", 0) for r in rows)
    res["direct_data_vs_alone_min"] = min(r.get("direct_data_vs_alone", 0) for r in rows)
    res["staged_vs_alone_min"] = min(r["staged_vs_alone"] for r in rows)
    res["pass"] = res["staged_data_vs_alone_min"] >= 0.9
    return res


def sixteen(b):
    srcs = [b.gen("hp-typical", b.a.small_stream, 100 + i)[0] for i in range(16)]
    log("sixteen: 16 streams at 2 MB/s through the stage")
    h = staged_home(b, "sixteen")
    _, job, _ = b.tl(h, "backup", "--limit-rate", "2MB", "--via", "stage", *srcs)
    ext = extents_per_stream(h, job["job_id"])
    res = {"seconds": round(job["seconds"], 2), **drive_figures(job), "extents_per_stream": ext}
    res["pass"] = bool(res["backhitches"] == 0 and len(ext) == 16 and all(n == 1 for n in ext.values()))
    return res


def watch_folder(path, stop, peak):
    while not stop.is_set():
        total = 0
        for root, _, files in os.walk(path):
            for f in files:
                try:
                    total += os.path.getsize(os.path.join(root, f))
                except OSError:
                    pass
        peak[0] = max(peak[0], total)
        time.sleep(0.1)


def small(b):
    n = 4
    each = parse_size(b.a.small_job) // n
    srcs = [b.gen("hp-typical", each, 200 + i)[0] for i in range(n)]
    h = staged_home(b, "small", b.a.small_stage)
    stage = os.path.join(h, "..", os.path.basename(h) + "-stage")
    stop, peak = threading.Event(), [0]
    t = threading.Thread(target=watch_folder, args=(stage, stop, peak))
    t.start()
    log(f"small: {b.a.small_job} through a stage of {b.a.small_stage}")
    try:
        _, job, _ = b.tl(h, "backup", "--via", "stage", *srcs)
    finally:
        stop.set()
        t.join()
    _, v, _ = b.tl(h, "verify", job["job_id"])
    to = b.path("small-restore")
    b.tl(h, "restore", job["job_id"], "--to", to)
    identical = all(same_tree(s, os.path.join(to, os.path.basename(s))) for s in srcs)
    limit = parse_size(b.a.small_stage)
    res = {"job_bytes": job["bytes"], "status": job["status"], "seconds": round(job["seconds"], 2),
           "stage_limit": limit, "stage_peak_bytes": peak[0], "stage_waits": job.get("stage_waits"),
           "verify_ok": v.get("ok"), "identical": identical, **drive_figures(job)}
    res["pass"] = bool(job["status"] == "ok" and v.get("ok") and identical and peak[0] <= limit
                       and (job.get("stage_waits") or {}).get("count", 0) > 0)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-stage-bench")
    ap.add_argument("--only", default=",".join(EXPERIMENTS))
    ap.add_argument("--quick", action="store_true", help="small sizes, a few minutes")
    ap.add_argument("--model", default="lto3")
    ap.add_argument("--scale", default="0.25")
    ap.add_argument("--stage-size", default="4G")
    ap.add_argument("--stream-size", type=parse_size, default=parse_size("96M"))
    ap.add_argument("--small-stream", type=parse_size, default=parse_size("48M"))
    ap.add_argument("--small-job", default="1G")
    ap.add_argument("--small-stage", default="256M")
    a = ap.parse_args()
    if a.quick:
        a.stream_size, a.small_stream, a.small_job = parse_size("32M"), parse_size("16M"), "512M"
    a.bin = os.path.abspath(a.bin)
    # Each run starts from nothing: homes, stages and sources are made afresh.
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    b = Bench(a, a.work)
    out = {"benchmark": "stage", "settings": {"model": a.model, "scale": a.scale, "clock": "real",
                                               "stage_size": a.stage_size, "stream_size": a.stream_size}}
    for name in a.only.split(","):
        try:
            out[name] = globals()[name](b)
        except Fail as e:
            out[name] = {"error": str(e), "pass": False}
        log(f"{name}: pass={out[name].get('pass')}")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
