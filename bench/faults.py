#!/usr/bin/env python3
"""Backups under injected write errors and restores under injected read errors, as
one JSON document on stdout (progress on stderr).

Backups: --backups times, a fresh home (virtual library, 8 slots) backs up the
sources with `TAPELOOM_FAULTS="write-error-rate=P;seed=N"` (P = --write-errors over
the job's blocks, so most jobs meet one or more); every other backup also meets a
deferred write error (`write-error-deferred@lbn=K`, K drawn from the seed), whose
lost blocks the writer must write again on the next cartridge. Each job must end ok
(a cartridge a write failed on is left and the job goes on on the next), verify, and
restore identical to its sources.

Restores:
One job is backed up on the virtual library (no drive model: disk speed) from
--streams folders of `tapeloom gen --preset hp-typical` and a folder of small files,
woven into one multiplexed job. Then, --restores times, with
`TAPELOOM_FAULTS="read-error-rate=P;seed=N"` (docs/FAULTS.md; N = 1, 2, ...; P =
--bad-blocks over the job's blocks, so most restores meet one or more):

  1. `verify JOB` under the same faults lists the bad blocks (the plan decides each
     block by a hash of the seed and its place, so every reader meets the same);
  2. the entries that touch a bad block are worked out from the catalog alone: the
     block's stream, from the job's extents, and the entries of that stream whose
     first and last blocks enclose it;
  3. `restore JOB --to DIR` under the same faults must name exactly those entries in
     its errors, and restore every other file identical to its source.

The binary must be built with the test hooks (cargo build --release --features
tapeloom/test-hooks, or scripts/test.sh's `cargo test`): one built without them
ignores TAPELOOM_FAULTS, and is refused.

  python3 bench/faults.py                 # 100 restores
  python3 bench/faults.py --restores 10
"""
import argparse, json, os, random, shutil, sqlite3, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Bench, Fail, log, parse_size, REPO  # noqa: E402
from stage_kill import make_misc, same_file  # noqa: E402


def tl(a, home, args, faults=None):
    env = dict(os.environ)
    if faults:
        env["TAPELOOM_FAULTS"] = faults
    p = subprocess.run([a.bin, "--home", home, "--json", *map(str, args)], capture_output=True,
                       text=True, errors="replace", env=env, timeout=600)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = None
    return p.returncode, doc, p.stderr.strip()


def needs_hooks(a):
    """Exits when a.bin ignores TAPELOOM_FAULTS (built without the test hooks)."""
    code, _, _ = tl(a, os.path.join(a.work, "probe"), ["library", "status"], "no-such-fault")
    if code == 0:
        sys.exit(f"{a.bin} ignores TAPELOOM_FAULTS: build it with "
                 "cargo build --release --features tapeloom/test-hooks")


def touched(db, job, bad):
    """Entries of `job` whose records touch one of the bad blocks [(volume seq, lbn)]."""
    out = set()
    for seq, lbn in bad:
        row = db.execute("SELECT stream FROM extents WHERE job_id = ? AND seq = ? AND first_lbn <= ? "
                         "AND first_lbn + blocks > ?", (job, seq, lbn, lbn)).fetchone()
        if row is None:
            continue  # stream 0 (the index) or another job's block: no entry's data
        for (path,) in db.execute(
                "SELECT path FROM files WHERE job_id = ? AND stream = ? AND "
                "(start_seq < ? OR (start_seq = ? AND start_lbn <= ?)) AND "
                "(end_seq > ? OR (end_seq = ? AND end_lbn >= ?))",
                (job, row[0], seq, seq, lbn, seq, seq, lbn)):
            out.add(bytes(path).decode(errors="replace"))
    return out


def write_trials(a, srcs, blocks):
    """Backups under random write errors: each must end ok, verify and restore
    identical."""
    rate = a.write_errors / blocks
    runs, failures = [], []
    for n in range(1, a.backups + 1):
        home = os.path.join(a.work, f"wb-{n}")
        tl(a, home, ["library", "create", "--drives", 1, "--slots", 8])
        spec = f"write-error-rate={rate:.6f};seed={n}"
        if n % 2 == 0:
            spec += f";write-error-deferred@lbn={random.Random(n).randrange(2, blocks)}"
        code, b, err = tl(a, home, ["backup", *srcs], spec)
        row = {"seed": n, "exit": code, "status": (b or {}).get("status"), "spec": spec,
               "deferred": "deferred write error" in err,
               "cartridges": len((b or {}).get("volumes", []))}
        ok = code == 0 and row["status"] == "ok"
        if ok:
            c, v, err = tl(a, home, ["verify", b["job_id"]])
            ok = c == 0 and v and v.get("ok")
        if ok:
            out = os.path.join(a.work, "wb-out")
            shutil.rmtree(out, ignore_errors=True)
            c, _, err = tl(a, home, ["restore", b["job_id"], "--to", out])
            ok = c == 0 and all(
                subprocess.run(["diff", "-rq", s, os.path.join(out, os.path.basename(s))],
                               stdout=subprocess.DEVNULL).returncode == 0 for s in srcs)
        row["ok"] = bool(ok)
        if not ok:
            row["error"] = err[-200:]
            failures.append(row)
        else:
            shutil.rmtree(home, ignore_errors=True)
        runs.append(row)
        if n % 10 == 0:
            log(f"{n} backups, {len(failures)} failed")
    return {"write_error_rate": rate, "backups": len(runs),
            "meeting_write_errors": sum(r["cartridges"] > 1 for r in runs),
            "meeting_deferred_errors": sum(r["deferred"] for r in runs),
            "cartridges_left": sum(max(r["cartridges"] - 1, 0) for r in runs),
            "ok_verified_identical": sum(r["ok"] for r in runs), "failures": failures}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-faults")
    ap.add_argument("--restores", type=int, default=100)
    ap.add_argument("--backups", type=int, default=100)
    ap.add_argument("--write-errors", type=float, default=1.5, help="failed writes per backup, on average")
    ap.add_argument("--streams", type=int, default=2)
    ap.add_argument("--stream-size", type=parse_size, default=parse_size("24M"))
    ap.add_argument("--bad-blocks", type=float, default=3.0, help="bad blocks per restore, on average")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    needs_hooks(a)
    b = Bench(a, a.work)
    t0 = time.monotonic()
    srcs = b.streams(a.streams) + [make_misc(b.path("misc") + "/misc")]
    home = b.path("home")
    _, job, _ = b.tl(home, "backup", "--extent-size", "1M", *srcs)
    jid = job["job_id"]
    db = sqlite3.connect("file:" + os.path.join(home, "catalog.sqlite") + "?mode=ro", uri=True)
    vols = {v: s for s, v in db.execute("SELECT jv.seq, v.barcode FROM job_volumes jv JOIN volumes v "
                                        "ON v.id = jv.volume_id WHERE jv.job_id = ?", (jid,))}
    rate = a.bad_blocks / job["blocks"]
    sources = {}
    for s in srcs:
        for root, _, files in os.walk(s):
            for f in files:
                p = os.path.join(root, f)
                sources[os.path.join(os.path.basename(s), os.path.relpath(p, s))] = p
    runs, failures = [], []
    for n in range(1, a.restores + 1):
        spec = f"read-error-rate={rate:.6f};seed={n}"
        _, v, _ = tl(a, home, ["verify", jid], spec)
        bad = [(vols[x["volume"]], x["block"]) for x in (v or {}).get("bad_blocks", [])]
        want = touched(db, jid, bad)
        out = os.path.join(a.work, "out")
        shutil.rmtree(out, ignore_errors=True)
        code, r, err = tl(a, home, ["restore", jid, "--to", out], spec)
        named = {e["path"] for e in (r or {}).get("errors", [])}
        same = different = 0
        missing = []
        for rel, src in sources.items():
            if rel in named:
                continue
            p = os.path.join(out, rel)
            if not os.path.exists(p):
                missing.append(rel)
            elif same_file(p, src):
                same += 1
            else:
                different += 1
        ok = r is not None and named == want and not missing and different == 0 \
            and code == (1 if want else 0)
        row = {"seed": n, "bad_blocks": len(bad), "entries_touched": len(want), "named": len(named),
               "restored_identical": same, "ok": ok}
        if not ok:
            row.update(want_not_named=sorted(want - named)[:5], named_not_touched=sorted(named - want)[:5],
                       missing=missing[:5], different=different, exit=code, error=err[-200:])
            failures.append(row)
        runs.append(row)
        if n % 10 == 0:
            log(f"{n} restores, {len(failures)} failed")
    backups = write_trials(a, srcs, job["blocks"])
    failures += backups["failures"]
    doc = {"benchmark": "faults", "job_blocks": job["blocks"], "backups": backups,
           "read_error_rate": rate,
           "restores": len(runs),
           "restores_meeting_bad_blocks": sum(r["bad_blocks"] > 0 for r in runs),
           "bad_blocks": sum(r["bad_blocks"] for r in runs),
           "entries_named": sum(r["named"] for r in runs),
           "files_restored_identical": sum(r["restored_identical"] for r in runs),
           "failures": failures, "seconds": round(time.monotonic() - t0, 1),
           "pass": not failures}
    json.dump(doc, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
