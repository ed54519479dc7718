#!/usr/bin/env python3
"""Repack and reclamation (docs/COPIES.md), as one JSON document.

A home under --work with a virtual library of 2 drives, 24 slots of 256M, a pool
`main` (retention 30 days, reclaim at 60%, --jobs-per-cartridge jobs per
cartridge) and a copy pool `vault`. On each of 4 cartridges of `main`, the
backups of January (--expired of them, --expired-size each) and then one of June
(--live-size, copied to `vault`). On the test clock in June the January jobs
have expired: each cartridge holds 1 live job among many expired ones. The
binary must read TAPELOOM_NOW (build it with --features tapeloom/test-hooks).

  repack   `repack --pool main` frees the 4 cartridges (each labelled anew);
           every live job verifies and restores identical from its new place;
           `catalog rebuild` from the tapes alone (in a copy of the home) gives
           the same jobs and copies, and they restore identical.
  kills    --trials times, from the home as it was before the repack: `repack
           --pool main` killed with SIGKILL at a random moment of its run; then
           every live job is read from exactly one place of `main` (no second
           whole copy there) and restores identical; a second `repack --pool
           main` then finishes: the 4 cartridges freed, every job identical.

  python3 bench/repack.py
  python3 bench/repack.py --trials 5
"""
import argparse, json, os, random, shutil, signal, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Fail, log, parse_size, same_tree, tapeloom_json, tapeloom_ok, REPO  # noqa: E402

JAN = "2026-01-05T00:00:00Z"
JUNE = "2026-06-01T00:00:00Z"
NOW = "2026-06-05T00:00:00Z"


def tl(a, home, args, now=NOW):
    """One command with --json on the test clock: (exit code, JSON or None, stderr)."""
    return tapeloom_json(a.bin, home, args, {"TAPELOOM_NOW": now}, timeout=1800)


def ok(a, home, args, now=NOW):
    return tapeloom_ok(a.bin, home, args, {"TAPELOOM_NOW": now}, timeout=1800)


def tree(path, size, seed):
    """Random files of `size` bytes in all under `path`, some in a subfolder."""
    rnd = random.Random(seed)
    os.makedirs(os.path.join(path, "sub"), exist_ok=True)
    left, n = size, 0
    while left > 0:
        part = min(left, rnd.randint(1 << 10, 2 << 20))
        with open(os.path.join(path, "sub" if n % 2 else "", f"f{n:03}"), "wb") as f:
            f.write(rnd.randbytes(part))
        left -= part
        n += 1


def setup(a):
    """The home before any repack: (home, {job id: source}, the 4 cartridges)."""
    home = os.path.join(a.work, "home")
    ok(a, home, ["library", "create", "--drives", 2, "--slots", 24, "--capacity", "256M"])
    ok(a, home, ["pool", "create", "vault"])
    ok(a, home, ["pool", "create", "main", "--retention", "30d", "--reclaim", "60%",
                 "--max-jobs-per-volume", a.expired + 1])
    live, tapes = {}, []
    for c in range(4):
        for e in range(a.expired):
            src = os.path.join(a.work, "src", f"old{c}-{e}")
            tree(src, a.expired_size, 100 * c + e)
            ok(a, home, ["backup", src, "--pool", "main"], now=JAN)
        src = os.path.join(a.work, "src", f"live{c}")
        tree(src, a.live_size, 1000 + c)
        b = ok(a, home, ["backup", src, "--pool", "main"], now=JUNE)
        live[str(b["job_id"])] = src
        tapes.append(b["volumes"][0])
        ok(a, home, ["copy", b["job_id"], "--to-pool", "vault"], now=JUNE)
    if len(set(tapes)) != 4:
        raise Fail(f"the live jobs are not on 4 cartridges: {tapes}")
    return home, live, tapes


def jobs_of(a, home):
    return {str(j["job_id"]): j for j in ok(a, home, ["jobs"])["jobs"]}


def shape(jobs):
    """What a rebuild is to give back: each job's name, set, files, bytes,
    cartridges, the copy it moved to and its copies."""
    out = []
    for j in jobs.values():
        copies = sorted(f"{c['copy_no']}:{c['pool']}:{c['state']}:{c['volumes']}"
                        for c in j.get("copies", []))
        out.append(f"{j['name']}|{j['set']}|{j['files']}|{j['bytes']}|{j['volumes']}|"
                   f"{j.get('moved_to')}|{copies}")
    return sorted(out)


def restores(a, home, live, tag):
    """Whether every live job restores identical from `home`."""
    good = True
    for job, src in live.items():
        out = os.path.join(a.work, f"out-{tag}-{job}")
        shutil.rmtree(out, ignore_errors=True)
        code, _, _ = tl(a, home, ["restore", job, "--to", out])
        good = good and code == 0 and same_tree(src, out)
        shutil.rmtree(out, ignore_errors=True)
    return good


def places_in_main(a, home, live):
    """For each live job, how many places of pool `main` it is read from: its
    own cartridges or the copy it moved to, and any other whole copy in `main`."""
    jobs = jobs_of(a, home)
    out = {}
    for job in live:
        j = jobs.get(job)
        if j is None:
            out[job] = 0
            continue
        extra = [c for c in j.get("copies", []) if c["pool"] == "main" and c["state"] == "ok"]
        out[job] = 1 + len(extra)
    return out


def freed(a, home, tapes):
    """The cartridges of `tapes` labelled anew since the backups (a later move may
    have written to one again: it is free for its pool), with none of the jobs
    they held then."""
    import sqlite3
    db = sqlite3.connect(os.path.join(home, "catalog.sqlite"))
    rows = db.execute("SELECT v.barcode, COALESCE(g.generation, 0) FROM volumes v "
                      "LEFT JOIN volume_generations g ON g.volume_id = v.id").fetchall()
    old = {j for (j,) in db.execute("SELECT id FROM jobs WHERE started_ns < ?", (a.june_ns,))}
    held = {b for (b,) in db.execute(
        "SELECT DISTINCT v.barcode FROM job_volumes jv JOIN volumes v ON v.id = jv.volume_id "
        f"WHERE jv.job_id IN ({','.join(str(j) for j in old) or 'NULL'})")}
    db.close()
    return sorted(b for b, gen in rows if b in tapes and gen >= 1 and b not in held)


def repack(a, home, live, tapes):
    before = jobs_of(a, home)
    t0 = time.monotonic()
    r = ok(a, home, ["repack", "--pool", "main"])
    seconds = time.monotonic() - t0
    cands = [{"barcode": c["barcode"], "expired_percent": round(c["expired_percent"], 1)}
             for c in r["candidates"]]
    after = jobs_of(a, home)
    verified = all(ok(a, home, ["verify", j])["ok"] for j in live)
    same = restores(a, home, live, "repack")
    # From the tapes alone, in a copy of the home.
    rb_home = os.path.join(a.work, "home-rebuild")
    shutil.rmtree(rb_home, ignore_errors=True)
    shutil.copytree(home, rb_home, symlinks=True)
    for f in ("catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"):
        if os.path.exists(os.path.join(rb_home, f)):
            os.remove(os.path.join(rb_home, f))
    rb = ok(a, rb_home, ["catalog", "rebuild"])
    rebuilt = jobs_of(a, rb_home)
    by_name = {j["name"]: src for job, src in live.items() for j in [after[job]]}
    rb_live = {jid: by_name[j["name"]] for jid, j in rebuilt.items() if j["name"] in by_name}
    rb_same = restores(a, rb_home, rb_live, "rebuilt")
    shutil.rmtree(rb_home, ignore_errors=True)
    res = {"seconds": round(seconds, 1), "candidates": cands,
           "freed": freed(a, home, tapes), "jobs_before": len(before), "jobs_after": len(after),
           "expired_jobs_forgotten": sum(len(x["expired_jobs"]) for x in r["repacked"]),
           "moved": [{"job": m["job_id"], "from": m["from"], "to": m["to"]}
                     for x in r["repacked"] for m in x["moved"]],
           "verified": verified, "identical": same,
           "rebuild": {"jobs_moved": len(rb["jobs_moved"]), "copies_added": len(rb["copies_added"]),
                       "same_jobs_and_copies": shape(rebuilt) == shape(after),
                       "identical": rb_same and len(rb_live) == len(live)}}
    res["pass"] = bool(len(cands) == 4 and min(c["expired_percent"] for c in cands) >= 70
                       and res["freed"] == sorted(tapes) and verified and same
                       and res["rebuild"]["same_jobs_and_copies"] and res["rebuild"]["identical"])
    return res, seconds


def kills(a, snapshot, live, tapes, full_seconds):
    trials = []
    rnd = random.Random(7)
    for t in range(a.trials):
        home = os.path.join(a.work, "home-kill")
        shutil.rmtree(home, ignore_errors=True)
        shutil.copytree(snapshot, home, symlinks=True)
        delay = rnd.uniform(0.02, max(0.15, full_seconds * 0.3))
        env = dict(os.environ, TAPELOOM_NOW=NOW)
        env.pop("TAPELOOM_FAULTS", None)
        p = subprocess.Popen([a.bin, "--home", home, "--json", "repack", "--pool", "main"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        time.sleep(delay)
        killed = p.poll() is None
        if killed:
            p.send_signal(signal.SIGKILL)
        p.wait()
        places = places_in_main(a, home, live)
        one = all(n == 1 for n in places.values())
        same = restores(a, home, live, f"kill{t}")
        code, r2, err = tl(a, home, ["repack", "--pool", "main"])
        fin = freed(a, home, tapes) if code == 0 else []
        same2 = code == 0 and restores(a, home, live, f"after{t}")
        trial = {"delay_s": round(delay, 2), "killed": killed, "one_place_each": one,
                 "identical_after_kill": same, "second_repack_exit": code,
                 "freed_after_second": len(fin), "identical_after_second": same2}
        if code != 0:
            trial["second_repack_error"] = err[-300:]
        trial["pass"] = bool(one and same and code == 0 and len(fin) == 4 and same2)
        trials.append(trial)
        log(f"trial {t}: killed={killed} after {delay:.2f}s pass={trial['pass']}")
        shutil.rmtree(home, ignore_errors=True)
    return {"trials": trials, "killed": sum(t["killed"] for t in trials),
            "passed": sum(t["pass"] for t in trials),
            "pass": all(t["pass"] for t in trials) and sum(t["killed"] for t in trials) > 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-repack-bench")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--expired", type=int, default=5)
    ap.add_argument("--expired-size", type=parse_size, default=parse_size("32M"))
    ap.add_argument("--live-size", type=parse_size, default=parse_size("24M"))
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    # The January jobs started before this (nanoseconds since the epoch).
    a.june_ns = 1_780_000_000 * 10**9
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    probe = os.path.join(a.work, "probe")
    ok(a, probe, ["library", "create", "--drives", 1, "--slots", 2])
    code, _, _ = tl(a, probe, ["expire", "--dry-run"], now="not a time")
    if code == 0:
        sys.exit(f"{a.bin} ignores TAPELOOM_NOW: build it with "
                 "cargo build --release --features tapeloom/test-hooks")
    out = {"benchmark": "repack",
           "settings": {"cartridges": 4, "expired_jobs_per_cartridge": a.expired,
                        "expired_size": a.expired_size, "live_size": a.live_size,
                        "trials": a.trials}}
    t0 = time.monotonic()
    try:
        home, live, tapes = setup(a)
        out["cartridges"] = tapes
        snapshot = os.path.join(a.work, "snapshot")
        shutil.copytree(home, snapshot, symlinks=True)
        out["repack"], seconds = repack(a, home, live, tapes)
        log(f"repack: pass={out['repack']['pass']} in {seconds:.1f}s")
        out["kills"] = kills(a, snapshot, live, tapes, seconds)
    except Fail as e:
        out["error"] = str(e)
    out["pass"] = bool(out.get("repack", {}).get("pass") and out.get("kills", {}).get("pass"))
    out["seconds"] = round(time.monotonic() - t0, 1)
    shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
