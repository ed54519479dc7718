#!/usr/bin/env python3
"""Kill -9 trials of the server while four clients send, as one JSON document on
stdout (progress on stderr).

Each trial has a fresh home whose library has 2 drives and no drive model (the
drives write at disk speed, so a trial takes seconds), four client tokens and an
admin's. The sources, made once per run under --work, are four trees c0..c3 (a
big file of random bytes and three small ones); c0 and c1 are sent as fast as the
clients can, c2 and c3 held to --slow-rate, so that at any moment some streams
are whole on the server's stage, some still coming and some on a drive. A trial:

  1. starts the server (`tapeloom server`, its log on stderr at level info) and
     backs up a small tree `misc` through it: the earlier job;
  2. starts the four clients' backups and kills the server with SIGKILL at a
     moment drawn (seeded by --seed) uniformly in [0.05, 0.9] of the time the four
     took in a calibration trial run to its end;
  3. reads from the killed server's log the streams it said were whole on the
     stage ("a stream is whole on the stage", logged before the client is
     answered): every stream a client was told the server holds is among them;
  4. starts the server again and waits (up to 180 s) until no job of the
     catalog is running and no chunk is left spooled on the stage: the server
     resumed what the killed one left; then stops it with SIGTERM;
  5. checks (the names in each trial's `checks`):
       acknowledged_on_tape  every job with a stream the log called whole ended
                             `ok` and restores identical to its source (one
                             stream per job here);
       ok_identical          every job of the four that ended `ok` restores
                             identical;
       cut_named             every job of the four that did not end `ok` names
                             its cut stream among its errors (`<stream NAME>`),
                             or never began (no row);
       earlier_verifies      `verify` of the earlier job says ok;
       catalog_check         `catalog check` says ok;
       none_running          no job is left running or failed with chunks.

A trial's failures are recorded in it and the run goes on; `pass` is true only
when every trial passed every check. The homes of failed trials are kept under
--work for a look.

  python3 bench/server_kill.py                # 20 trials
  python3 bench/server_kill.py --quick        # 5 trials
"""
import argparse, json, os, random, re, shutil, signal, sqlite3, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import default_work_parent, log, REPO  # noqa: E402
from clients import tl, make_tree, client_cmd, trees_equal  # noqa: E402

WHOLE = re.compile(r"a stream is whole on the stage.*\bjob=(\d+).*\bstream=(\d+)")
SIZES = {"c0": 24 << 20, "c1": 16 << 20, "c2": 6 << 20, "c3": 4 << 20}
SLOW = {"c2", "c3"}


def start_server(bin_, home, log_path):
    env = dict(os.environ, RUST_LOG="info")
    err = open(log_path, "a")
    p = subprocess.Popen([bin_, "--home", home, "server", "--listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    url = p.stdout.readline().strip().removeprefix("listening on ")
    fp = p.stdout.readline().strip().removeprefix("certificate fingerprint (SHA-256) ")
    if not url.startswith("https://"):
        raise RuntimeError(f"the server did not start: see {log_path}")
    return p, url, fp


def catalog(home):
    db = sqlite3.connect(f"file:{os.path.join(home, 'catalog.sqlite')}?mode=ro", uri=True)
    try:
        jobs = {r[0]: {"name": r[1], "status": r[2]}
                for r in db.execute("SELECT id, name, status FROM jobs")}
        for j in jobs.values():
            j["errors"] = []
        for job, path, why in db.execute("SELECT job_id, path, reason FROM job_errors"):
            if job in jobs:
                jobs[job]["errors"].append((bytes(path).decode("utf-8", "replace"), why))
        spooled = db.execute("SELECT COUNT(*) FROM staged_chunks WHERE state = 'spooled'").fetchone()[0]
        return jobs, spooled
    finally:
        db.close()


def wait_resumed(home, secs):
    until = time.monotonic() + secs
    while True:
        try:
            jobs, spooled = catalog(home)
            # A job the restarted server has yet to resume is still queued.
            if spooled == 0 and all(j["status"] not in ("running", "queued")
                                    for j in jobs.values()):
                return jobs
        except sqlite3.Error:
            pass
        if time.monotonic() > until:
            raise RuntimeError("the restarted server did not resume its jobs within "
                               f"{secs} s")
        time.sleep(0.25)


def new_home(a, home):
    shutil.rmtree(home, ignore_errors=True)
    tl(a.bin, home, "library", "create", "--drives", "2", "--slots", "8", "--capacity", "8G")
    tokens = {c: tl(a.bin, home, "server", "token", "add", c)["token"] for c in SIZES}
    admin = tl(a.bin, home, "server", "token", "add", "admin", "--admin")["token"]
    return tokens, admin


def send_all(a, srcs, url, fp, tokens):
    procs = {}
    for c, src in srcs.items():
        args = ["--json", "backup", src]
        if c in SLOW:
            args += ["--limit-rate", a.slow_rate]
        procs[c] = subprocess.Popen(client_cmd(a.bin, url, fp, tokens[c], *args),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return procs


def calibrate(a, work, srcs, misc):
    home = os.path.join(work, "calibration", "home")
    tokens, _ = new_home(a, home)
    server, url, fp = start_server(a.bin, home, os.path.join(work, "calibration", "server.log"))
    try:
        subprocess.run(client_cmd(a.bin, url, fp, tokens["c0"], "--json", "backup", misc),
                       check=True, capture_output=True)
        t0 = time.monotonic()
        procs = send_all(a, srcs, url, fp, tokens)
        for c, p in procs.items():
            out, err = p.communicate()
            if p.returncode != 0:
                raise RuntimeError(f"calibration: client {c}: {err.strip()}")
        return time.monotonic() - t0
    finally:
        server.kill()
        server.wait()


def restore_same(a, url, fp, token, job, src, out):
    r = subprocess.run(client_cmd(a.bin, url, fp, token, "--json", "restore", str(job), "--to", out),
                       capture_output=True, text=True)
    same = r.returncode == 0 and trees_equal(src, out)
    shutil.rmtree(out, ignore_errors=True)
    return same, r.stderr.strip()


def trial(a, work, n, at, srcs, misc):
    tdir = os.path.join(work, f"trial-{n}")
    home = os.path.join(tdir, "home")
    shutil.rmtree(tdir, ignore_errors=True)
    os.makedirs(tdir)
    tokens, admin = new_home(a, home)
    first_log = os.path.join(tdir, "server-1.log")
    server, url, fp = start_server(a.bin, home, first_log)
    failures = []
    earlier = json.loads(subprocess.run(
        client_cmd(a.bin, url, fp, tokens["c0"], "--json", "backup", misc),
        check=True, capture_output=True, text=True).stdout)["job_id"]
    t0 = time.monotonic()
    procs = send_all(a, srcs, url, fp, tokens)
    time.sleep(max(0.0, at - (time.monotonic() - t0)))
    server.send_signal(signal.SIGKILL)
    killed_at = time.monotonic() - t0
    server.wait()
    clients = {}
    for c, p in procs.items():
        try:
            p.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            failures.append(f"client {c} still ran 90 s after the kill")
        clients[c] = p.returncode
    whole = set()
    with open(first_log, errors="replace") as f:
        for line in f:
            m = WHOLE.search(line)
            if m:
                whole.add((int(m.group(1)), int(m.group(2))))
    second_log = os.path.join(tdir, "server-2.log")
    server, url, fp = start_server(a.bin, home, second_log)
    checks = {}
    try:
        jobs = wait_resumed(home, 180)
        checks["none_running"] = True
    except RuntimeError as e:
        jobs = catalog(home)[0]
        checks["none_running"] = False
        failures.append(str(e))
    mine = {j: v for j, v in jobs.items() if v["name"] in SIZES}
    ack_ok, ok_same, cut_named = True, True, True
    for job, v in sorted(mine.items()):
        c = v["name"]
        if v["status"] == "ok":
            same, err = restore_same(a, url, fp, tokens[c], job, srcs[c],
                                     os.path.join(tdir, f"out-{job}"))
            if not same:
                ok_same = False
                failures.append(f"job {job} ({c}) ok but does not restore identical: {err}")
        elif not any(p.startswith("<stream ") for p, _ in v["errors"]):
            cut_named = False
            failures.append(f"job {job} ({c}) {v['status']} without its cut stream named: {v['errors']}")
    for job, stream in sorted(whole):
        v = jobs.get(job)
        if v is None or v["status"] != "ok":
            ack_ok = False
            failures.append(f"job {job} stream {stream} was acknowledged whole but the job is "
                            f"{v and v['status']}: {v and v['errors']}")
    checks.update(acknowledged_on_tape=ack_ok, ok_identical=ok_same, cut_named=cut_named)
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        failures.append("the restarted server did not stop within 30 s of SIGTERM")
    v = tl(a.bin, home, "verify", str(earlier))
    checks["earlier_verifies"] = bool(v.get("ok"))
    cc = tl(a.bin, home, "catalog", "check")
    checks["catalog_check"] = bool(cc.get("ok"))
    for k in ("earlier_verifies", "catalog_check"):
        if not checks[k]:
            failures.append(f"{k} failed")
    statuses = {v["name"]: v["status"] for v in mine.values()}
    passed = not failures and all(checks.values())
    if passed:
        shutil.rmtree(tdir, ignore_errors=True)
    return {
        "trial": n, "kill_at_s": round(killed_at, 3), "streams_acknowledged": len(whole),
        "jobs_begun": len(mine), "statuses": statuses, "clients_exit": clients,
        "checks": checks, "failures": failures, "passed": passed,
        **({} if passed else {"home": home}),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="5 trials")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--slow-rate", default="2MB", help="--limit-rate of the clients c2 and c3")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    if a.quick:
        a.trials = 5
    work = a.work or os.path.join(default_work_parent(), "tapeloom-server-kill")
    os.makedirs(work, exist_ok=True)
    srcs = {}
    for i, (c, size) in enumerate(SIZES.items()):
        srcs[c] = os.path.join(work, "src", c)
        if not os.path.isdir(srcs[c]):
            make_tree(srcs[c], i, size)
    misc = os.path.join(work, "src", "misc")
    if not os.path.isdir(misc):
        make_tree(misc, 9, 20_000)
    t_run = time.monotonic()
    window = calibrate(a, work, srcs, misc)
    log(f"calibration: the four clients took {window:.2f} s")
    rng = random.Random(a.seed)
    trials = []
    for n in range(1, a.trials + 1):
        at = rng.uniform(0.05, 0.9) * window
        t = trial(a, work, n, at, srcs, misc)
        log(f"trial {n}: killed at {t['kill_at_s']} s, {t['streams_acknowledged']} streams "
            f"acknowledged, {t['statuses']}: {'passed' if t['passed'] else 'FAILED ' + '; '.join(t['failures'])}")
        trials.append(t)
    passed = sum(t["passed"] for t in trials)
    out = {
        "bench": "server_kill", "seed": a.seed, "calibration_seconds": round(window, 2),
        "run_seconds": round(time.monotonic() - t_run, 1),
        "trials": trials,
        "totals": {"passed": passed, "failed": len(trials) - passed,
                   "streams_acknowledged": sum(t["streams_acknowledged"] for t in trials)},
    }
    out["pass"] = passed == len(trials)
    print(json.dumps(out, indent=2))
    sys.exit(0 if out["pass"] else 1)


if __name__ == "__main__":
    main()
