#!/usr/bin/env python3
"""Every drive busy: four clients through one server on four drives, against the
same four jobs on one drive. One JSON document on stdout (progress on stderr).

The library has --drives drives (default 4) with the LTO-3 model at --scale
(default 0.25: 20 MB/s native, a 32 MB buffer) on the real clock, so a drive
left without data stops and backhitches as a real one would. --clients client
processes (default 4), each with its own token, back up the hp-typical tree of
--size (default 512M, made once with `tapeloom gen` and kept in --work) through
the server as fast as they can. The server sends a job to a drive as soon as its
client sends at the drives' lowest speed step (its default).

  many   the library of --drives drives;
  one    the same jobs on a library of one drive.

Per drive of each job: its data span (its first data block to its last, from
the job's document), its data rate over that span against its model rate for the
data (top speed step times the data's compression ratio), and its backhitches
while the data streamed. The data phase is the first data block of any job to
the last of all. A drive's share of its model rate may pass 1 by a few hundredths:
the drive's buffer takes the first blocks faster than the tape moves.

Pass: in `many` every job ends ok, the drives' data spans all overlap (all
drives wrote at once), each drive wrote at 0.9 or more of its model rate with 0
backhitches while its data streamed, the data phase took at most 0.35 of
`one`'s, and every job verifies (`verify JOB` on the server's home) and restores
identical through the server.

  python3 bench/drives.py
  python3 bench/drives.py --size 128M --scale 0.1
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import default_work_parent, log, REPO  # noqa: E402
from clients import tl, start_server, client_cmd, client_docs, trees_equal  # noqa: E402

MIN_RATE_SHARE = 0.9
MAX_PHASE_RATIO = 0.35


def run_case(a, work, name, drives, src):
    home = os.path.join(work, name, "home")
    shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    tl(a.bin, home, "library", "create", "--drives", str(drives), "--slots", "12",
       "--capacity", "16G", "--model", "lto3", "--clock", "real", "--scale", str(a.scale))
    tokens = [tl(a.bin, home, "server", "token", "add", f"c{i}")["token"] for i in range(a.clients)]
    admin = tl(a.bin, home, "server", "token", "add", "admin", "--admin")["token"]
    server, url, fp = start_server(a.bin, home, None)
    try:
        log(f"{name}: {a.clients} clients on {drives} drive(s)")
        t0 = time.monotonic()
        # Each client in a set of its own: a client's sets hold only its jobs.
        procs = [subprocess.Popen(client_cmd(a.bin, url, fp, tok, "--json", "backup", src,
                                             "--set", f"c{i}"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i, tok in enumerate(tokens)]
        most_busy = 0
        while any(p.poll() is None for p in procs):
            q = subprocess.run(client_cmd(a.bin, url, fp, admin, "--json", "queue"),
                               capture_output=True, text=True)
            if q.returncode == 0:
                most_busy = max(most_busy, json.loads(q.stdout).get("drives_busy", 0))
            time.sleep(0.5)
        wall = time.monotonic() - t0
        docs = client_docs(procs, f"{name} ")
        rows = []
        for i, d in enumerate(docs):
            for dr in d["drives"]:
                span = dr.get("data_span_ns")
                share = None
                if dr.get("data_span_mb_per_s") and dr.get("model_mb_per_s"):
                    share = dr["data_span_mb_per_s"] / dr["model_mb_per_s"]
                rows.append({
                    "client": f"c{i}", "job_id": d["job_id"], "status": d["status"],
                    "drive": dr["drive"], "volumes": dr["volumes"], "bytes": dr["bytes"],
                    "data_span_s": None if not span else round((span[1] - span[0]) / 1e9, 2),
                    "span_ns": span,
                    "data_mb_per_s": dr.get("data_span_mb_per_s") and round(dr["data_span_mb_per_s"], 2),
                    "model_mb_per_s": dr.get("model_mb_per_s") and round(dr["model_mb_per_s"], 2),
                    "share_of_model_rate": share and round(share, 3),
                    "backhitches": dr.get("backhitches"),
                })
        spans = [r["span_ns"] for r in rows if r["span_ns"]]
        phase = (max(s[1] for s in spans) - min(s[0] for s in spans)) / 1e9
        overlap = max(s[0] for s in spans) < min(s[1] for s in spans)
        checked = []
        if a.check and name == "many":
            for i, d in enumerate(docs):
                v = tl(a.bin, home, "verify", str(d["job_id"]))
                out = os.path.join(work, name, "out", f"c{i}")
                r = subprocess.run(client_cmd(a.bin, url, fp, tokens[i], "--json", "restore",
                                              str(d["job_id"]), "--to", out),
                                   capture_output=True, text=True)
                same = r.returncode == 0 and trees_equal(src, out)
                shutil.rmtree(out, ignore_errors=True)
                checked.append({"job_id": d["job_id"], "verified": v["ok"], "restored_identical": same})
                log(f"{name}: job {d['job_id']} verify {v['ok']}, restore {'same' if same else 'DIFFERENT'}")
        for r in rows:
            r.pop("span_ns")
        return {
            "drives": drives, "wall_seconds": round(wall, 1), "data_phase_seconds": round(phase, 2),
            "all_spans_overlap": overlap, "most_drives_busy": most_busy,
            "all_ok": all(d["status"] == "ok" for d in docs),
            "drive_rows": rows, "checked": checked,
        }
    finally:
        server.kill()
        server.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--drives", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--size", default="512M", help="size of the hp-typical tree each client sends")
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--no-check", dest="check", action="store_false",
                    help="skip the verifies and restores")
    ap.add_argument("--work", default=None, help="scratch folder; the tree is kept there")
    a = ap.parse_args()
    work = a.work or os.path.join(default_work_parent(), "tapeloom-drives")
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, f"src-{a.size}")
    if not os.path.isdir(src):
        log(f"making the hp-typical {a.size} tree")
        subprocess.run([a.bin, "gen", "--preset", "hp-typical", "--total", a.size, src],
                       check=True, capture_output=True)
    many = run_case(a, work, "many", a.drives, src)
    one = run_case(a, work, "one", 1, src)
    ratio = many["data_phase_seconds"] / one["data_phase_seconds"]
    rows = many["drive_rows"]
    out = {
        "bench": "drives", "cores": os.cpu_count(), "scale": a.scale, "clients": a.clients,
        "tree": f"hp-typical {a.size}", "many": many, "one": one,
        "data_phase_ratio": round(ratio, 3),
        "least_share_of_model_rate": min((r["share_of_model_rate"] or 0) for r in rows),
        "backhitches_while_streaming": sum(r["backhitches"] or 0 for r in rows),
    }
    out["pass"] = bool(
        many["all_ok"] and one["all_ok"] and many["all_spans_overlap"]
        and len({r["drive"] for r in rows}) == a.drives
        and out["least_share_of_model_rate"] >= MIN_RATE_SHARE
        and out["backhitches_while_streaming"] == 0
        and ratio <= MAX_PHASE_RATIO
        and (not a.check or all(c["verified"] and c["restored_identical"] for c in many["checked"]))
    )
    print(json.dumps(out, indent=2))
    sys.exit(0 if out["pass"] else 1)


if __name__ == "__main__":
    main()
