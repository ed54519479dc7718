#!/usr/bin/env python3
"""Kill -9 trials of every command that writes or reads tape, as one JSON document on
stdout (progress on stderr).

Each trial has a fresh home whose library is the virtual library without a drive
model (`library create --drives 1 --slots 8`; cartridges of --capacity, 400G, or
--span-capacity, 32M, for the spanning kind), so that commands run at disk speed.
Sources, made once per run: --streams folders of `tapeloom gen --preset hp-typical`
(s1, s2, ...) and `misc`, a few small files. A trial:

  1. backs up the sources whole: the earlier job;
  2. runs the trial's command and kills it with SIGKILL at a moment drawn (seeded by
     --seed) uniformly in [0.05, 0.95] of the command's duration, measured once per
     kind by a calibration run of the same command in a home of its own:
       backup    `backup` of the sources, each stream limited to --limit-rate;
       spanning  the same on cartridges of --span-capacity: the job spans several;
       restore   `restore EARLIER --to DIR`;
       verify    `verify EARLIER`;
       rebuild   `catalog rebuild` into an empty catalog (the old one moved aside);
  3. checks (the names in each trial's `checks`):
       rebuild_again     (rebuild) `catalog rebuild` runs to its end and exits 0;
       catalog_check     `catalog check` exits 0 (when `catalog --help` lists it);
       recovered         (backup, spanning) a killed job that is `failed` is recovered
                         by `catalog recover JOB`;
       restore_killed    (backup, spanning) `restore JOB`: every restored file equals
                         its source, and none is restored that the sources lack (the
                         files not restored, which did not reach tape whole before
                         the kill, are counted);
       restore_again     (restore) the same restore, with default options, into the
                         same folder as the killed one exits 0;
       again_identical   (restore) that folder is then the sources' tree: the same
                         names, types, contents, modes and mtimes (a file the killed
                         restore left cut under its name would be kept as "already
                         there" and differ);
       no_temporary      (restore) no temporary file is left in it (a file being
                         restored is named `.NAME.tapeloom-` and 16 hex digits);
       rebuilt_alike     (backup, spanning) with the catalog deleted, `catalog rebuild`
                         and a restore of the job give the same files, identical;
       verify_earlier, earlier_identical
                         the earlier job verifies and restores equal to its sources;
       next_backup       a next backup ends ok and verifies.

The homes of failed trials are kept under --work for a look; the others are removed.

Restores take a fraction of a second at disk speed, so their kind has trials of its
own count, --restore-trials (20, --quick included).

  python3 bench/kill.py                 # 10 trials of each kind, 20 restores: 60
  python3 bench/kill.py --quick         # 2 of each, 20 restores
  python3 bench/kill.py --only backup,rebuild --trials 4
"""
import argparse, json, os, random, re, shutil, signal, stat, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Bench, Fail, log, parse_size, same_tree, REPO  # noqa: E402
from stage_kill import check, make_misc, restored_files, source_files, tl_any  # noqa: E402

KINDS = ["backup", "spanning", "restore", "verify", "rebuild"]


class Trial:
    def __init__(self, b, name, kind):
        self.b, self.kind = b, kind
        self.home = b.path(f"home-{name}")
        cap = b.a.span_capacity if kind == "spanning" else b.a.capacity
        b.tl(self.home, "library", "create", "--drives", 1, "--slots", 8, "--capacity", cap)

    def out(self, name):
        return self.home + "-" + name

    def remove(self):
        for p in (self.home, self.out("restore"), self.out("earlier"), self.out("again"),
                  self.out("catalog-before")):
            shutil.rmtree(p, ignore_errors=True)

    def earlier(self, srcs):
        _, job, _ = self.b.tl(self.home, "backup", *srcs)
        if job["status"] != "ok":
            raise Fail(f"earlier backup: {job['status']}")
        self.earlier_id = job["job_id"]

    def forget_catalog(self):
        keep = self.out("catalog-before")
        os.makedirs(keep, exist_ok=True)
        for f in ("catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm"):
            p = os.path.join(self.home, f)
            if os.path.exists(p):
                shutil.move(p, os.path.join(keep, f))

    def command(self, srcs):
        a = self.b.a
        base = [a.bin, "--home", self.home, "--json"]
        if self.kind in ("backup", "spanning"):
            return base + ["backup", "--limit-rate", a.limit_rate, *srcs]
        if self.kind == "restore":
            shutil.rmtree(self.out("restore"), ignore_errors=True)
            return base + ["restore", str(self.earlier_id), "--to", self.out("restore")]
        if self.kind == "verify":
            return base + ["verify", str(self.earlier_id)]
        self.forget_catalog()
        return base + ["catalog", "rebuild"]

    def run(self, srcs, kill_after=None, timeout=900):
        """The trial's command; killed after `kill_after` seconds when given. Returns
        (seconds, exit code, killed)."""
        cmd = self.command(srcs)
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        killed = False
        while p.poll() is None:
            now = time.monotonic() - t0
            if kill_after is not None and now >= kill_after:
                p.send_signal(signal.SIGKILL)
                p.wait()
                killed = True
                break
            if now > timeout:
                p.kill()
                p.wait()
                raise Fail(f"{self.kind} did not end in {timeout} s")
            time.sleep(0.002)
        return time.monotonic() - t0, p.returncode, killed


def calibrate(b, kind, srcs):
    log(f"calibration: {kind}")
    t = Trial(b, f"calibrate-{kind}", kind)
    t.earlier(srcs)
    secs, code, _ = t.run(srcs)
    if code != 0:
        raise Fail(f"calibration {kind}: exit {code}")
    t.remove()
    return round(secs, 3)


def last_job(b, home):
    code, doc, err = tl_any(b, home, "jobs")
    if code != 0 or not doc:
        raise Fail(f"jobs: {err}")
    return doc["jobs"][-1]


def killed_backup_checks(b, t, res, files):
    job = last_job(b, t.home)
    if job["job_id"] == t.earlier_id:
        res["job"] = None
        return  # killed before the job was recorded: nothing of it to check
    jid = str(job["job_id"])
    res["job"] = {"id": job["job_id"], "status_after_kill": job["status"]}
    if job["status"] == "failed":
        code, doc, err = tl_any(b, t.home, "catalog", "recover", jid)
        check(res, "recovered", code == 0, err)
        if doc:
            res["job"]["recovered_files"] = doc.get("files_added")
    code, r, err = tl_any(b, t.home, "restore", jid, "--to", t.out("restore"))
    res["job"]["restore_exit"] = code
    same, diff, missing, extra = restored_files(t.out("restore"), files)
    res["job"].update(identical=same, different=len(diff), not_restored=len(missing))
    check(res, "restore_killed", not diff and not extra, f"different {diff[:3]} extra {extra[:3]}")
    # From the tapes alone: the same files.
    t.forget_catalog()
    code, doc, err = tl_any(b, t.home, "catalog", "rebuild")
    ok = code == 0
    if ok:
        shutil.rmtree(t.out("again"), ignore_errors=True)
        tl_any(b, t.home, "restore", jid, "--to", t.out("again"))
        same2, diff2, missing2, extra2 = restored_files(t.out("again"), files)
        ok = (same2, diff2, missing2, extra2) == (same, diff, missing, extra)
        err = f"before the rebuild {same} identical, after {same2}; different {diff2[:3]}"
    check(res, "rebuilt_alike", ok, err)


# A file a restore is writing: `.NAME.tapeloom-` and 16 hex digits.
TEMPORARY = re.compile(rb"^\..+\.tapeloom-[0-9a-f]{16}$", re.S)


def tree_of(root):
    """Every object below `root` by relative path: (type, mode, size, mtime, target)."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            link = os.readlink(p) if stat.S_ISLNK(st.st_mode) else None
            size = st.st_size if stat.S_ISREG(st.st_mode) else 0
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                                             size, st.st_mtime_ns, link)
    return out


def same_as_sources(out, srcs):
    """Whether `out` holds each source as a folder named after it, alike in names,
    types, modes, sizes, mtimes and contents; else why not."""
    for s in srcs:
        mine = os.path.join(out, os.path.basename(s))
        a, b = tree_of(s), tree_of(mine)
        if a != b:
            diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            return False, f"{os.path.basename(s)}: {len(diff)} differ, as {diff[:3]}"
        if not same_tree(s, mine):
            return False, f"{os.path.basename(s)}: contents differ"
    return True, None


def temporary_files(root):
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files
            if TEMPORARY.match(os.fsencode(f))]


def restore_again_checks(b, t, res, srcs):
    """The killed restore run again into its folder, with default options."""
    code, doc, err = tl_any(b, t.home, "restore", str(t.earlier_id), "--to", t.out("restore"))
    check(res, "restore_again", code == 0, err)
    if doc:
        res["again"] = {"files": doc.get("files"), "unchanged": doc.get("unchanged"),
                        "skipped": doc.get("skipped_count")}
    same, why = same_as_sources(t.out("restore"), srcs)
    check(res, "again_identical", same, why)
    left = temporary_files(t.out("restore"))
    check(res, "no_temporary", not left, f"{len(left)} left, as {left[:2]}")


def after_checks(b, t, res, srcs, has_check):
    if t.kind == "restore":
        restore_again_checks(b, t, res, srcs)
    if t.kind == "rebuild":
        code, _, err = tl_any(b, t.home, "catalog", "rebuild")
        check(res, "rebuild_again", code == 0, err)
    if has_check:
        code, doc, err = tl_any(b, t.home, "catalog", "check")
        check(res, "catalog_check", code == 0 and doc and doc.get("ok"), err or doc)
    if t.kind in ("backup", "spanning"):
        killed_backup_checks(b, t, res, source_files(srcs))
    e = str(t.earlier_id)
    code, doc, err = tl_any(b, t.home, "verify", e)
    check(res, "verify_earlier", code == 0 and doc and doc.get("ok"), err)
    out = t.out("earlier")
    shutil.rmtree(out, ignore_errors=True)
    code, _, err = tl_any(b, t.home, "restore", e, "--to", out)
    same = code == 0 and all(same_tree(s, os.path.join(out, os.path.basename(s))) for s in srcs)
    check(res, "earlier_identical", same, err or "restored tree differs")
    code, doc, err = tl_any(b, t.home, "backup", srcs[-1])
    ok = code == 0 and doc and doc.get("status") == "ok"
    if ok:
        code, v, err = tl_any(b, t.home, "verify", str(doc["job_id"]))
        ok = code == 0 and v and v.get("ok")
    check(res, "next_backup", ok, err)


def trial(b, kind, n, srcs, frac, duration, has_check):
    res = {"trial": n, "fraction": round(frac, 4), "kill_after_s": round(frac * duration, 3),
           "checks": {}, "failures": []}
    t0 = time.monotonic()
    t = Trial(b, f"{kind}{n}", kind)
    try:
        t.earlier(srcs)
        secs, code, killed = t.run(srcs, kill_after=frac * duration)
        res.update(killed=killed, exit=None if killed else code, ran_s=round(secs, 3))
        after_checks(b, t, res, srcs, has_check)
    except Fail as e:
        res["failures"].append(f"error: {e}")
    res["pass"] = not res["failures"]
    res["seconds"] = round(time.monotonic() - t0, 1)
    if res["pass"]:
        t.remove()
    else:
        res["home"] = t.home
    log(f"{kind} {n}: pass={res['pass']} {res['failures'][:2]}")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-kill")
    ap.add_argument("--trials", type=int, help="trials per kind (default 10; quick 2)")
    ap.add_argument("--restore-trials", type=int, default=20, help="trials of the restore kind")
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(KINDS))
    ap.add_argument("--streams", type=int, default=3)
    ap.add_argument("--stream-size", type=parse_size, help="per stream (default 24M; quick 8M)")
    ap.add_argument("--limit-rate", default="8MB")
    ap.add_argument("--capacity", default="400G")
    ap.add_argument("--span-capacity", default="32M")
    a = ap.parse_args()
    a.trials = a.trials or (2 if a.quick else 10)
    a.stream_size = a.stream_size or parse_size("8M" if a.quick else "24M")
    if a.quick:
        a.span_capacity = "12M"
    kinds = [k for k in a.only.split(",") if k]
    for k in kinds:
        if k not in KINDS:
            sys.exit(f"unknown kind {k}; kinds: {', '.join(KINDS)}")
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    b = Bench(a, a.work)
    t0 = time.monotonic()
    srcs = b.streams(a.streams) + [make_misc(b.path("misc") + "/misc")]
    help_text = subprocess.run([a.bin, "catalog", "--help"], capture_output=True, text=True).stdout
    has_check = " check" in help_text
    rnd = random.Random(a.seed)
    out = {"benchmark": "kill", "seed": a.seed,
           "settings": {"trials_per_kind": a.trials, "restore_trials": a.restore_trials,
                        "streams": a.streams, "stream_size": a.stream_size,
                        "limit_rate": a.limit_rate, "capacity": a.capacity,
                        "span_capacity": a.span_capacity, "catalog_check": has_check},
           "kinds": {}}
    for kind in kinds:
        duration = calibrate(b, kind, srcs)
        count = a.restore_trials if kind == "restore" else a.trials
        trials = [trial(b, kind, n, srcs, rnd.uniform(0.05, 0.95), duration, has_check)
                  for n in range(count)]
        out["kinds"][kind] = {"calibration_s": duration, "trials": trials,
                              "passed": sum(t["pass"] for t in trials)}
    all_trials = [t for k in out["kinds"].values() for t in k["trials"]]
    failed = {}
    for t in all_trials:
        for f in t["failures"]:
            name = f.split(":")[0]
            failed[name] = failed.get(name, 0) + 1
    out["totals"] = {"trials": len(all_trials), "passed": sum(t["pass"] for t in all_trials),
                     "failed": sum(not t["pass"] for t in all_trials),
                     "killed": sum(bool(t.get("killed")) for t in all_trials),
                     "failed_checks": failed, "seconds": round(time.monotonic() - t0, 1)}
    out["pass"] = out["totals"]["failed"] == 0
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
