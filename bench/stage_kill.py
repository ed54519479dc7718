#!/usr/bin/env python3
"""Kill -9 trials of backups through the disk stage, as one JSON document on stdout
(progress on stderr).

Each trial has a fresh home whose library is `tapeloom library create --model lto3
--clock virtual --scale 0.25`, with a stage added by `tapeloom stage add`. The clock
is virtual because a trial runs a dozen commands on a fresh home: with --clock real
the first backup of each home takes 22 s (the model's 17 s load) and each later
command a few seconds (a verify of 75 MB: 5 s), which would take the default run past
20 minutes. The sources, made once per run, are --streams folders of
`tapeloom gen --preset hp-typical --total --stream-size` (s1, s2, ...) and a folder
`misc` of a few small files (empty, 1 byte, a few KB, one in a subfolder): one
stream each. A trial:

  1. backs up the sources whole through the stage: the earlier job;
  2. starts the same backup through the stage with each stream limited to
     --limit-rate and --chunk-size chunks, and kills it with SIGKILL at a moment drawn
     (seeded by --seed) in its phase's window (below);
  3. runs `stage resume`, which must succeed and list the killed job, then checks
     (the names in each trial's `checks`):
       resume              exit 0, and the JSON lists one job, not the earlier one;
       stage_used_zero     `stage status`: every stage's used is 0;
       verify_resumed      `verify JOB` exits 0 and says ok;
       restore_resumed     `restore JOB --to DIR`: every restored file equals its
                           source byte for byte, and a file of the sources not
                           restored (counted as missing) is named by the resume's or
                           the restore's errors, or its stream is (`<stream NAME>`:
                           the backup stopped while it spooled); the restore's exit
                           code is recorded, not checked;
       restored_something  at least one file restored;
       status_matches      a resumed job that lacks files is not `ok`;
       verify_earlier, earlier_identical
                           the earlier job verifies, and restores equal to its
                           sources (diff -r);
       next_backup, verify_next
                           a next backup through the stage ends ok and verifies.
     `tapeloom catalog` has no `check` command in this version (only `rebuild`); the
     trial runs `catalog check` (check catalog_check) only when `catalog --help`
     lists one.

Phases, their windows measured by one backup per phase run to its end (the
"calibration" in the JSON) with the same options:

  spool    A stage of 1G: the drive starts only when the despool start rule (the
           default `--despool whole`: the streams' runs fit back to back) holds,
           late in the job. Window: from the first chunk file (*.tlc) on the stage
           until the drive began writing the job's data in the calibration run. Kill at a uniform fraction in
           [0.02, 0.85] of it after the first *.tlc of the trial's own backup.
  despool  A stage of 2 chunks per stream: it is three quarters full within a second
           or two, so the drive despools while the sources spool, to their end.
           Window: from the drive's first write of data (the cartridge's data file
           grows by more than 2 blocks past its size at the first *.tlc, or a chunk
           file is deleted) to the job's end in the calibration run. Kill at a
           uniform fraction in [0.02, 0.9] of it after the trial's own despool began.
           With the virtual clock the drive writes each chunk at disk speed, so a
           kill lands between or within those bursts: `tape_growing` says whether the
           cartridge's data file grew in the last 50 ms before the kill.

The stage folder and the cartridge's data file are polled every 5 ms. What was seen
at the kill is in each trial's `observed`: seconds since the start and since the
trigger, *.tlc and *.part files on the stage, chunk files deleted so far, bytes the
cartridge grew by, and (read after the kill, before anything else runs) the catalog's
staged_chunks rows of the job by state. `phase` is spool when the drive had not
written data (no growth past the first *.tlc's size beyond 2 blocks, no chunk
despooled), else despool. A backup that ends before its kill moment is tried again
(at most twice, with a fresh home); `attempts` counts them.

Failures of a trial are recorded in its `failures` and the run goes on; `pass` is
true only when every trial passed every check.

The homes of failed trials are kept under --work (`home` in the trial) for a look.

Measured on this machine (2 cores, shared): the default run (10 trials per phase,
3 streams of 32M at 2MB/s, each trial's killed backup 16 s long when not killed)
took 3 min 38 s; --quick (3 trials per phase, 2 streams of 16M) 48 s.

  python3 bench/stage_kill.py --quick
  python3 bench/stage_kill.py --trials 20 --seed 7 --bin target/release/tapeloom > out.json
"""
import argparse, json, os, random, shutil, signal, sqlite3, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Bench, Fail, first_line, log, parse_size, same_tree, REPO  # noqa: E402

PHASES = ["spool", "despool"]
POLL = 0.005
BLOCK = 256 << 10  # backup's default --block-size


def make_misc(d):
    """A handful of small files; deterministic."""
    rnd = random.Random(12345)
    files = {"empty": b"", "one-byte": b"x", "text.txt": b"tapeloom\n" * 37,
             "4k.bin": rnd.randbytes(4096), "odd.bin": rnd.randbytes(12_345),
             "sub/deeper/leaf.bin": rnd.randbytes(70_001)}
    for rel, data in files.items():
        p = os.path.join(d, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    return d


def source_files(srcs):
    """Every regular file of the sources: (stream name, relative path) -> absolute."""
    out = {}
    for s in srcs:
        name = os.path.basename(s)
        for root, _, files in os.walk(s):
            for f in files:
                p = os.path.join(root, f)
                out[(name, os.path.relpath(p, s))] = p
    return out


def same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


class Trial:
    """One home with its stage."""

    def __init__(self, b, name, stage_size):
        a = b.a
        self.b = b
        self.home = b.path(f"home-{name}")
        self.stage = self.home + "-stage"
        b.tl(self.home, "library", "create", "--drives", 1, "--slots", 4, "--capacity", "400G",
             "--model", a.model, "--clock", a.clock, "--scale", a.scale)
        b.tl(self.home, "stage", "add", self.stage, "--size", stage_size)

    def remove(self):
        for p in (self.home, self.stage, self.home + "-restore", self.home + "-earlier"):
            shutil.rmtree(p, ignore_errors=True)
        for p in (self.home + "-backup.out", self.home + "-backup.err"):
            if os.path.exists(p):
                os.remove(p)

    def tape_bytes(self):
        d = os.path.join(self.home, "library", "tapes")
        total = 0
        for f in os.listdir(d) if os.path.isdir(d) else []:
            if f.endswith(".data"):
                try:
                    total += os.path.getsize(os.path.join(d, f))
                except OSError:
                    pass
        return total

    def chunk_files(self):
        tlc, part = set(), 0
        for root, _, files in os.walk(self.stage):
            for f in files:
                if f.endswith(".tlc"):
                    tlc.add(os.path.join(root, f))
                elif f.endswith(".part"):
                    part += 1
        return tlc, part

    def chunk_rows(self, job_id):
        """staged_chunks rows of jobs after job_id, by state (read only)."""
        uri = "file:" + os.path.join(self.home, "catalog.sqlite") + "?mode=ro"
        try:
            db = sqlite3.connect(uri, uri=True, timeout=10)
            try:
                rows = db.execute("SELECT state, COUNT(*) FROM staged_chunks WHERE job_id > ? "
                                  "GROUP BY state", (job_id,)).fetchall()
                jobs = db.execute("SELECT id, status FROM jobs WHERE id > ?", (job_id,)).fetchall()
                per = db.execute("SELECT COALESCE(s.name, c.stream), c.state, COUNT(*) FROM staged_chunks c "
                                 "LEFT JOIN streams s ON s.job_id = c.job_id AND s.stream = c.stream "
                                 "WHERE c.job_id > ? GROUP BY 1, 2", (job_id,)).fetchall()
            finally:
                db.close()
            streams = {}
            for name, state, n in per:
                streams.setdefault(str(name), {})[state] = n
            return {"chunks": dict(rows), "chunks_by_stream": streams, "jobs": {str(i): s for i, s in jobs}}
        except sqlite3.Error as e:
            return {"error": str(e)}

    def backup_args(self, srcs):
        a = self.b.a
        return [a.bin, "--home", self.home, "--json", "backup", "--via", "stage",
                "--limit-rate", a.limit_rate, "--chunk-size", a.chunk_size, *srcs]

    def watched_backup(self, srcs, phase, delay=None, timeout=600):
        """Runs the rate-limited backup, watching the stage and the cartridge. With
        delay, kills it (SIGKILL) that many seconds after the phase's trigger: the
        first *.tlc (spool) or the drive's first data (despool). Returns the timeline
        and, when killed, what was seen at the kill."""
        t0 = time.monotonic()
        out = open(self.home + "-backup.out", "wb")
        err = open(self.home + "-backup.err", "wb")
        p = subprocess.Popen(self.backup_args(srcs), stdout=out, stderr=err)
        seen, deleted, base = set(), 0, None
        first_tlc = despool = kill_at = None
        sizes = []  # (t, tape bytes), the last 50 ms
        killed = False
        obs = None
        try:
            while True:
                now = time.monotonic() - t0
                tlc, part = self.chunk_files()
                tape = self.tape_bytes()
                sizes = [(t, s) for t, s in sizes if now - t <= 0.05] + [(now, tape)]
                seen |= tlc
                deleted = len(seen - tlc)  # chunk names are never used twice
                if first_tlc is None and tlc:
                    first_tlc, base = now, tape
                if first_tlc is not None and despool is None and (tape > base + 2 * BLOCK or deleted):
                    despool = now
                if delay is not None and kill_at is None:
                    trigger = first_tlc if phase == "spool" else despool
                    if trigger is not None:
                        kill_at = trigger + delay
                if kill_at is not None and now >= kill_at and p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    p.wait()
                    killed = True
                    obs = {"seconds": round(now, 3),
                           "after_trigger_s": round(now - (first_tlc if phase == "spool" else despool), 3),
                           "tlc_files": len(tlc), "part_files": part, "chunk_files_deleted": deleted,
                           "tape_bytes_written": tape - (base or tape),
                           "tape_growing": sizes[0][1] != tape}
                    break
                if p.poll() is not None:
                    break
                if now > timeout:
                    p.kill()
                    p.wait()
                    raise Fail(f"backup did not end in {timeout} s")
                time.sleep(POLL)
        finally:
            out.close(), err.close()
        end = time.monotonic() - t0
        res = {"first_tlc_s": first_tlc, "despool_start_s": despool, "end_s": round(end, 3),
               "killed": killed, "exit": p.returncode}
        if killed:
            obs.update(self.chunk_rows(self.earlier_id))
            obs["phase"] = ("spool" if obs["tape_bytes_written"] <= 2 * BLOCK and obs["chunk_files_deleted"] == 0
                            and not obs.get("chunks", {}).get("despooled") else "despool")
            res["observed"] = obs
        elif p.returncode != 0:
            with open(self.home + "-backup.err", errors="replace") as f:
                raise Fail(f"backup exit {p.returncode}: {f.read()[-300:]}")
        return res


def earlier_job(t, srcs):
    _, job, _ = t.b.tl(t.home, "backup", "--via", "stage", *srcs)
    if job["status"] != "ok":
        raise Fail(f"earlier backup: status {job['status']}: {job.get('errors')}")
    t.earlier_id = job["job_id"]
    return job


def calibrate(b, phase, srcs):
    log(f"calibration: {phase}")
    t = Trial(b, f"calibrate-{phase}", stage_size(b, phase))
    earlier_job(t, srcs)
    r = t.watched_backup(srcs, phase)
    if r["first_tlc_s"] is None or r["despool_start_s"] is None:
        raise Fail(f"calibration {phase}: no chunk file or no despool seen: {r}")
    if phase == "spool":
        r["window_s"] = [0.0, round(r["despool_start_s"] - r["first_tlc_s"], 3)]
    else:
        r["window_s"] = [0.0, round(r["end_s"] - r["despool_start_s"], 3)]
    r["stage_size"] = stage_size(b, phase)
    t.remove()
    return r


def stage_size(b, phase):
    if phase == "spool":
        return "1G"
    return str(2 * parse_size(b.a.chunk_size) * (b.a.streams + 1))


def tl_any(b, home, *args):
    """One tapeloom command with --json whatever its exit: (exit code, JSON or None,
    the first error line)."""
    p = subprocess.run([b.a.bin, "--home", home, "--json", *map(str, args)], capture_output=True,
                       text=True, errors="replace", timeout=600)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = None
    return p.returncode, doc, first_line(p.stderr) if p.returncode else ""


def check(res, name, ok, why=None):
    res["checks"][name] = bool(ok)
    if not ok:
        res["failures"].append(f"{name}: {why}" if why else name)


def restored_files(out, files):
    """Compares a restore with the sources: (identical, different, missing, extra)."""
    same, diff, extra = 0, [], []
    found = set()
    for root, _, names in os.walk(out):
        for f in names:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, out)
            stream, _, path = rel.partition(os.sep)
            key = (stream, path)
            if key not in files:
                extra.append(rel)
                continue
            found.add(key)
            if same_file(p, files[key]):
                same += 1
            else:
                diff.append(rel)
    missing = sorted(f"{s}/{p}" for s, p in set(files) - found)
    return same, diff, missing, extra


def trial(b, phase, n, srcs, files, frac, window):
    res = {"trial": n, "fraction": round(frac, 4), "checks": {}, "failures": [], "attempts": 0}
    delay = frac * (window[1] - window[0]) + window[0]
    res["kill_after_trigger_s"] = round(delay, 3)
    t0, t = time.monotonic(), None
    try:
        for attempt in range(3):
            res["attempts"] += 1
            t = Trial(b, f"{phase}{n}-{attempt}", stage_size(b, phase))
            earlier = earlier_job(t, srcs)
            res["earlier_job"] = earlier["job_id"]
            w = t.watched_backup(srcs, phase, delay)
            if w["killed"]:
                break
            t.remove()
            log(f"{phase} {n}: the backup ended ({w['end_s']} s) before its kill; again")
            delay /= 2
        res["killed"] = w["killed"]
        res["kill_s"] = w.get("observed", {}).get("seconds")
        res["observed"] = w.get("observed")
        check(res, "killed", w["killed"], f"the backup ended before its kill {res['attempts']} times")
        if not w["killed"]:
            return res
        res["observed_phase"] = w["observed"]["phase"]
        log(f"{phase} {n}: killed at {res['kill_s']} s, observed {res['observed_phase']}: "
            f"tlc {w['observed']['tlc_files']}, deleted {w['observed']['chunk_files_deleted']}, "
            f"tape +{w['observed']['tape_bytes_written']}, rows {w['observed'].get('chunks_by_stream')}")
        after(b, t, res, srcs, files, earlier)
    except Fail as e:
        res["failures"].append(f"error: {e}")
        res["error"] = str(e)
    finally:
        res["seconds"] = round(time.monotonic() - t0, 2)
    res["pass"] = not res["failures"] and all(res["checks"].values())
    if t and res["pass"]:
        t.remove()
    elif t:
        res["home"] = t.home  # kept for a look
    log(f"{phase} {n}: pass={res['pass']} {res['failures']}")
    return res


def run_check(res, name, fn):
    """Runs one check; a command that fails fails that check only."""
    try:
        return fn()
    except Fail as e:
        check(res, name, False, str(e))
        return None


def after(b, t, res, srcs, files, earlier):
    h = t.home
    # Resume: must succeed and list the killed job.
    r = run_check(res, "resume", lambda: b.tl(h, "stage", "resume")[1])
    if r is None:
        earlier_checks(b, t, res, srcs, earlier)
        return
    jobs = r.get("jobs") or []
    ids = [j.get("job_id") for j in jobs]
    res["resume"] = {"jobs": ids, "status": [j.get("status") for j in jobs],
                     "errors": [e for j in jobs for e in (j.get("errors") or [])][:10]}
    check(res, "resume", len(jobs) == 1 and ids[0] != earlier["job_id"], f"resume listed jobs {ids}")
    if len(jobs) == 1:
        resumed_checks(b, t, res, files, jobs[0])
    earlier_checks(b, t, res, srcs, earlier)


def resumed_checks(b, t, res, files, job):
    h, jid = t.home, job.get("job_id")
    res["resumed_job"] = jid
    res["resumed_status"] = job.get("status")
    st = run_check(res, "stage_used_zero", lambda: b.tl(h, "stage", "status")[1])
    if st is not None:
        used = [s.get("used") for s in st.get("stages", [])]
        check(res, "stage_used_zero", used and all(u == 0 for u in used), f"stage status used {used}")
    rc, v, err = tl_any(b, h, "verify", jid)
    if v is None:
        check(res, "verify_resumed", False, f"verify {jid}: exit {rc}: {err}")
    else:
        res["verify_resumed"] = {k: v.get(k) for k in ("ok", "bad_blocks", "files_affected", "files_missing")}
        check(res, "verify_resumed", rc == 0 and v.get("ok") is True,
              f"verify {jid}: exit {rc}: {json.dumps(res['verify_resumed'])[:300]}")
    out = t.home + "-restore"
    rc, rr, err = tl_any(b, h, "restore", jid, "--to", out)
    if rr is None:
        check(res, "restore_resumed", False, f"restore {jid}: exit {rc}: {err}")
    else:
        same, diff, missing, extra = restored_files(out, files)
        res.update(files_restored=same, files_different=len(diff), files_missing=len(missing),
                   files_extra=len(extra), restore_exit=rc, restore_errors=(rr.get("errors") or [])[:10])
        if diff:
            res["different"] = diff[:10]
        # A missing file is explained when the resumed job or the restore names it, or
        # the resumed job says its stream was cut short ("<stream NAME>").
        named = {e.get("path") for e in (job.get("errors") or []) + (rr.get("errors") or [])}
        unexplained = [m for m in missing if m not in named and f"<stream {m.split('/')[0]}>" not in named]
        res["files_missing_unexplained"] = len(unexplained)
        if missing:
            res["missing_sample"] = missing[:5]
        check(res, "restore_resumed", not diff and not extra and not unexplained,
              f"restore {jid}: exit {rc}: {len(diff)} different, {len(extra)} extra, "
              f"{len(unexplained)} of {len(missing)} missing unexplained")
        check(res, "restored_something", same > 0, "nothing restored")
        check(res, "status_matches", not missing or job.get("status") != "ok",
              f"the resumed job is ok but {len(missing)} files are not in it "
              f"(restore exit {rc}: {'; '.join(e.get('path', '') + ': ' + e.get('reason', '') for e in (rr.get('errors') or [])[:2])})")
    shutil.rmtree(out, ignore_errors=True)


def earlier_checks(b, t, res, srcs, earlier):
    """The earlier job is untouched; the catalog checks; a next backup works."""
    h, eid = t.home, earlier["job_id"]
    v = run_check(res, "verify_earlier", lambda: b.tl(h, "verify", eid)[1])
    if v is not None:
        check(res, "verify_earlier", v.get("ok") is True, f"verify {eid}: ok {v.get('ok')}")
    again = t.home + "-earlier"
    if run_check(res, "earlier_identical", lambda: b.tl(h, "restore", eid, "--to", again)) is not None:
        bad = [os.path.basename(s) for s in srcs if not same_tree(s, os.path.join(again, os.path.basename(s)))]
        check(res, "earlier_identical", not bad, f"streams differ: {bad}")
    shutil.rmtree(again, ignore_errors=True)
    if b.catalog_check:
        c = run_check(res, "catalog_check", lambda: b.tl(h, "catalog", "check")[1])
        if c is not None:
            check(res, "catalog_check", c.get("ok", True) is not False, json.dumps(c)[:300])
    # A next backup through the stage.
    nb = run_check(res, "next_backup", lambda: b.tl(h, "backup", "--via", "stage", *srcs)[1])
    if nb is not None:
        check(res, "next_backup", nb.get("status") == "ok", f"status {nb.get('status')}: {nb.get('errors')}")
        v = run_check(res, "verify_next", lambda: b.tl(h, "verify", nb["job_id"])[1])
        if v is not None:
            check(res, "verify_next", v.get("ok") is True, f"verify {nb['job_id']}: ok {v.get('ok')}")


def has_catalog_check(binary):
    text = subprocess.run([binary, "catalog", "--help"], capture_output=True, text=True).stdout
    return any(line.split()[:1] == ["check"] for line in text.splitlines())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-stage-kill",
                    help="scratch folder, cleared at the start")
    ap.add_argument("--trials", type=int, help="trials per phase (default 10; quick 3)")
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--quick", action="store_true", help="3 trials per phase, smaller sources")
    ap.add_argument("--only", default=",".join(PHASES))
    ap.add_argument("--model", default="lto3")
    ap.add_argument("--clock", default="virtual", choices=["virtual", "real"])
    ap.add_argument("--scale", default="0.25")
    ap.add_argument("--streams", type=int, help="hp-typical streams (default 3; quick 2), besides misc")
    ap.add_argument("--stream-size", type=parse_size, help="data per stream (default 32M; quick 16M)")
    ap.add_argument("--limit-rate", default="2MB", help="per stream, in the killed backup")
    ap.add_argument("--chunk-size", default="1M", help="chunk files of the killed backup")
    a = ap.parse_args()
    a.trials = a.trials or (3 if a.quick else 10)
    a.streams = a.streams or (2 if a.quick else 3)
    a.stream_size = a.stream_size or parse_size("16M" if a.quick else "32M")
    a.bin = os.path.abspath(a.bin)
    if not os.access(a.bin, os.X_OK):
        ap.error(f"{a.bin} is not an executable (build it, or give --bin)")
    phases = a.only.split(",")
    if set(phases) - set(PHASES):
        ap.error(f"--only takes {','.join(PHASES)}")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    b = Bench(a, a.work)
    b.catalog_check = has_catalog_check(a.bin)
    rng = random.Random(a.seed)
    t_start = time.monotonic()
    out = {"benchmark": "stage_kill",
           "settings": {"seed": a.seed, "trials": a.trials, "quick": a.quick, "model": a.model,
                        "clock": a.clock, "scale": a.scale, "streams": a.streams,
                        "stream_size": a.stream_size, "limit_rate": a.limit_rate,
                        "chunk_size": a.chunk_size, "catalog_check": b.catalog_check,
                        "bin": a.bin, "work": a.work},
           "phases": {}}
    srcs = [b.gen("hp-typical", a.stream_size, seed=i + 1)[0] for i in range(a.streams)]
    srcs.append(make_misc(os.path.join(a.work, "src-misc", "misc")))
    files = source_files(srcs)
    out["settings"]["source_files"] = len(files)
    out["settings"]["source_bytes"] = sum(os.path.getsize(p) for p in files.values())
    # Both phases draw their fractions whether the other runs or not.
    draws = {ph: [rng.uniform(0.02, 0.85 if ph == "spool" else 0.9) for _ in range(a.trials)]
             for ph in PHASES}
    for phase in [p for p in PHASES if p in phases]:
        ph = out["phases"][phase] = {"stage_size": stage_size(b, phase)}
        fracs = draws[phase]
        try:
            cal = ph["calibration"] = calibrate(b, phase, srcs)
        except Fail as e:
            ph["calibration"] = {"error": str(e)}
            ph["trials"], ph["pass"] = [], False
            continue
        log(f"{phase}: window {cal['window_s']} s after the trigger")
        ph["trials"] = [trial(b, phase, n, srcs, files, f, cal["window_s"]) for n, f in enumerate(fracs)]
        ph["passed"] = sum(t["pass"] for t in ph["trials"])
        ph["observed_phases"] = {k: sum(t.get("observed_phase") == k for t in ph["trials"])
                                 for k in ("spool", "despool")}
        ph["pass"] = ph["passed"] == len(ph["trials"])
    trials = [t for ph in out["phases"].values() for t in ph.get("trials", [])]
    failed_checks = {}
    for t in trials:
        for k, v in t["checks"].items():
            if not v:
                failed_checks[k] = failed_checks.get(k, 0) + 1
    out["totals"] = {"trials": len(trials), "passed": sum(t["pass"] for t in trials),
                     "failed": sum(not t["pass"] for t in trials),
                     "files_restored": sum(t.get("files_restored", 0) for t in trials),
                     "files_missing": sum(t.get("files_missing", 0) for t in trials),
                     "files_different": sum(t.get("files_different", 0) for t in trials),
                     "files_missing_unexplained": sum(t.get("files_missing_unexplained", 0) for t in trials),
                     "failed_checks": failed_checks,
                     "seconds": round(time.monotonic() - t_start, 1)}
    out["pass"] = bool(trials) and all(ph.get("pass") for ph in out["phases"].values()) \
        and len(trials) == a.trials * len(phases)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
