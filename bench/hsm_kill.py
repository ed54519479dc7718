#!/usr/bin/env python3
"""Kill -9 trials of hierarchical storage, as one JSON document on stdout
(progress on stderr). Needs root (the daemon watches with fanotify).

One home (the virtual library without a drive model, so that commands run at
disk speed) manages one tree: --files regular files of /usr/share and --big
files of 4 MiB of random bytes, so that each command runs long enough to be cut.
The SHA-256 of every file is taken once, at the start; no trial changes a byte.

Trial N is of kind migrate, release, recall or daemon in turn, and kills with
SIGKILL at a moment drawn (seeded by --seed) uniformly in [0, 1] of the
duration the same command took the last time it ran to its end:

  migrate  every file recalled and touched (its mtime moved, its bytes
           unchanged: dirty), then `hsm migrate`, killed;
  release  every file premigrated, then `hsm release`, killed;
  recall   every file released, then `hsm recall` of the tree, killed;
  daemon   every file released, `hsm daemon` running, --readers `cat`s of
           released files started at once; the daemon is killed (the
           duration is that of the same reads through a daemon left to run,
           taken once at the start). Each reader
           must end within 60 s (an answer, not a hang), and a reader that
           ended well must have read the file's own bytes.

After each kill comes the next start, `hsm reconcile` (a migration cut before
its job ended also has `catalog recover` run on that job), then the checks:
`catalog check` and `hsm reconcile --check` clean, and every file's SHA-256,
after `hsm recall` of the tree (or straight from disk where it is resident or
premigrated), equal to the one taken at the start. Then the trial's command
runs to its end, and its duration is the next trial's.

  python3 bench/hsm_kill.py
  python3 bench/hsm_kill.py --trials 8
"""
import argparse, hashlib, json, os, random, shutil, signal, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import default_work_parent, log, REPO  # noqa: E402
from hsm import real_tree, sha, tl, wait_for, counters  # noqa: E402

KINDS = ["migrate", "release", "recall", "daemon"]


def all_files(tree):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs)


def run_to_end(a, home, *args):
    t0 = time.monotonic()
    r = tl(a, home, *args)
    return r, time.monotonic() - t0


def cut(a, home, after, *args):
    """Starts tapeloom with `args` and kills it after `after` seconds; whether it
    was still running then."""
    p = subprocess.Popen([a.bin, "--home", home, "--json", *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(after)
    running = p.poll() is None
    if running:
        p.send_signal(signal.SIGKILL)
    p.wait()
    return running


def touch_all(tree):
    now = time.time()
    for p in all_files(tree):
        os.utime(p, (now, now + 1))


def state_counts(a, home):
    return tl(a, home, "hsm", "status")["roots"][0]["files"]


def daemon_reads(a, home, work, tree, rng, before):
    """The daemon with --readers `cat`s of released files, none killed: how long
    the readers took, from their start to the last one's end."""
    stat_path = os.path.join(work, "daemon-calibration.json")
    released = state_counts(a, home)["released"]
    d = subprocess.Popen([a.bin, "--home", home, "hsm", "daemon", "--status", stat_path],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("the daemon marking the stubs", 120,
                 lambda: counters(stat_path).get("marked", -1) >= released)
        files = rng.sample(all_files(tree), min(a.readers, len(before)))
        t0 = time.monotonic()
        readers = [subprocess.Popen(["cat", "--", f], stdout=subprocess.DEVNULL) for f in files]
        for p in readers:
            p.wait(timeout=120)
        return time.monotonic() - t0
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=60)


def daemon_trial(a, home, work, tree, rng, before, after):
    stat_path = os.path.join(work, "daemon.json")
    try:
        os.remove(stat_path)
    except OSError:
        pass
    released = state_counts(a, home)["released"]
    d = subprocess.Popen([a.bin, "--home", home, "hsm", "daemon", "--status", stat_path],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for("the daemon marking the stubs", 120,
             lambda: counters(stat_path).get("marked", -1) >= released)
    files = rng.sample(all_files(tree), min(a.readers, len(before)))
    outs = os.path.join(work, "reads")
    shutil.rmtree(outs, ignore_errors=True)
    os.makedirs(outs)
    readers = []
    for i, f in enumerate(files):
        out = open(os.path.join(outs, str(i)), "wb")
        readers.append((f, out, subprocess.Popen(["cat", "--", f], stdout=out,
                                                 stderr=subprocess.DEVNULL)))
    time.sleep(after)
    running = d.poll() is None
    if running:
        d.send_signal(signal.SIGKILL)
    d.wait()
    hung, failed, good, wrong = 0, 0, 0, 0
    deadline = time.monotonic() + 60
    for i, (f, out, p) in enumerate(readers):
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung += 1
            p.kill()
            p.wait()
        out.close()
        if p.returncode == 0:
            if sha(os.path.join(outs, str(i))) == before[f]:
                good += 1
            else:
                wrong += 1
        else:
            failed += 1
    # The guardian ends once it has answered the readers.
    subprocess.run(["pkill", "-KILL", "-f", f"{home} hsm guardian"], capture_output=True)
    return running, {"readers": len(readers), "read_whole": good, "answered_error": failed,
                     "read_wrong": wrong, "hung": hung}


def failed_jobs(a, home):
    return [j["job_id"] for j in tl(a, home, "jobs").get("jobs", [])
            if j.get("status") in ("running", "failed")]


def check_all(a, home, tree, before):
    """The next start and the checks; what they found."""
    out = {}
    for j in failed_jobs(a, home):
        subprocess.run([a.bin, "--home", home, "catalog", "recover", str(j)], capture_output=True)
    rec = tl(a, home, "hsm", "reconcile")
    out["reconciled"] = {k: len(rec.get(k, [])) for k in ("recorded", "forgotten", "times", "punched")}
    cc = subprocess.run([a.bin, "--home", home, "--json", "catalog", "check"],
                        capture_output=True, text=True)
    out["catalog_check"] = cc.returncode == 0 and json.loads(cc.stdout).get("ok") is True
    again = tl(a, home, "hsm", "reconcile", "--check")
    out["reconcile_check"] = again.get("clean") is True
    r = subprocess.run([a.bin, "--home", home, "--json", "hsm", "recall", tree],
                       capture_output=True, text=True)
    out["recall_exit"] = r.returncode
    files = all_files(tree)
    same = sum(1 for p in files if before.get(p) == sha(p))
    out["identical"] = same
    out["files"] = len(before)
    out["ok"] = (out["catalog_check"] and out["reconcile_check"] and r.returncode == 0
                 and same == len(before) and len(files) == len(before))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--big", type=int, default=40)
    ap.add_argument("--readers", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/hsm_kill.py needs root: the hsm daemon watches with fanotify")
    work = a.work or os.path.join(default_work_parent(), "tapeloom-hsm-kill")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    tree, home = os.path.join(work, "tree"), os.path.join(work, "home")
    n = real_tree(tree, a.files)
    for i in range(a.big):
        with open(os.path.join(tree, f"big-{i:02}"), "wb") as f:
            f.write(os.urandom(4 << 20))
    before = {p: sha(p) for p in all_files(tree)}
    log(f"hsm kill: {len(before)} files ({n} from /usr/share, {a.big} of 4 MiB)")
    subprocess.run([a.bin, "--home", home, "library", "create", "--drives", "1", "--slots", "8",
                    "--capacity", "8G"], check=True, capture_output=True)
    tl(a, home, "hsm", "manage", tree)
    # Durations of each command run to its end, for the first cuts.
    last = {}
    _, last["migrate"] = run_to_end(a, home, "hsm", "migrate")
    _, last["release"] = run_to_end(a, home, "hsm", "release")
    _, last["recall"] = run_to_end(a, home, "hsm", "recall", tree)
    _, last["release"] = run_to_end(a, home, "hsm", "release")
    rng = random.Random(a.seed)
    last["daemon"] = daemon_reads(a, home, work, tree, random.Random(a.seed + 1), before)
    run_to_end(a, home, "hsm", "release")
    trials = []
    for i in range(a.trials):
        kind = KINDS[i % len(KINDS)]
        # The state the kind starts from.
        counts = state_counts(a, home)
        if kind == "migrate":
            if counts["released"] > 0:
                run_to_end(a, home, "hsm", "recall", tree)
            touch_all(tree)
        elif kind == "release" and counts["premigrated"] < len(before):
            run_to_end(a, home, "hsm", "migrate")
        elif kind in ("recall", "daemon") and counts["released"] < len(before):
            if counts["premigrated"] + counts["released"] < len(before):
                run_to_end(a, home, "hsm", "migrate")
            run_to_end(a, home, "hsm", "release")
        at = rng.uniform(0, last[kind])
        extra = None
        if kind == "migrate":
            running = cut(a, home, at, "hsm", "migrate")
        elif kind == "release":
            running = cut(a, home, at, "hsm", "release")
        elif kind == "recall":
            running = cut(a, home, at, "hsm", "recall", tree)
        else:
            running, extra = daemon_trial(a, home, work, tree, rng, before, at)
        found = check_all(a, home, tree, before)
        if extra is not None:
            found["readers"] = extra
            found["ok"] = found["ok"] and extra["hung"] == 0 and extra["read_wrong"] == 0
        # The command to its end: the next trial's duration.
        if kind == "migrate":
            # Every file recalled by the checks: touched, they migrate again.
            touch_all(tree)
            _, last["migrate"] = run_to_end(a, home, "hsm", "migrate")
        elif kind == "release":
            _, last["release"] = run_to_end(a, home, "hsm", "release")
        elif kind == "recall":
            run_to_end(a, home, "hsm", "release")
            _, last["recall"] = run_to_end(a, home, "hsm", "recall", tree)
        t = {"trial": i, "kind": kind, "kill_after_s": round(at, 3), "cut": running, **found}
        trials.append(t)
        log(f"hsm kill: trial {i} {kind} at {at:.2f} s (cut: {running}): "
            f"{'ok' if found['ok'] else 'FAILED'} {found}")
    ok = sum(1 for t in trials if t["ok"])
    out = {"bench": "hsm_kill", "seed": a.seed, "files": len(before), "trials": len(trials),
           "ok": ok, "cut": sum(1 for t in trials if t["cut"]),
           "by_kind": {k: {"trials": sum(1 for t in trials if t["kind"] == k),
                           "ok": sum(1 for t in trials if t["kind"] == k and t["ok"]),
                           "cut": sum(1 for t in trials if t["kind"] == k and t["cut"])}
                       for k in KINDS},
           "trials_detail": trials}
    print(json.dumps(out, indent=2))
    sys.exit(0 if ok == len(trials) else 1)


if __name__ == "__main__":
    main()
