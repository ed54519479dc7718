#!/usr/bin/env python3
"""Several servers, one site: two servers sharing one PostgreSQL catalog, each with
its own library, and many clients. One JSON document on stdout (progress on stderr).

PostgreSQL comes from the Debian package (`postgresql`), started here in a
temporary folder on 127.0.0.1 (as the postgres user when run as root) and stopped
at the end. Each server's home names the catalog and its own name in `home.toml`;
each library has --drives drives (default 2) with the LTO-3 model at --scale
(default 0.25) on the real clock, and barcodes of its own (TA..., TB...). The
servers take each other for dead after --heartbeat-timeout seconds (default 10;
the servers' own default is 60, shortened here so that the run is short).

--clients client processes (default 32), half pinned to server a and half to b,
each back up a tree of --size (default 16M) of noise held to --rate (default 4MB).

  all      every client's backup ends ok exactly once (one job row per client, no
           duplicate), all drives of both libraries wrote, and every job restores
           identical when asked of the server that did not write it (the client is
           sent on to the one whose library holds it).
  kill     the same, with server a killed (kill -9) once half of the jobs began:
           the backups it had claimed and not begun finish on b; the ones it was
           writing are failed with a reason, and once a is started again they are
           resumed to ok or end partial naming what was cut. While a is down, a
           restore of one of its jobs asked of b fails in one line naming a and
           the cartridges. At the end, one job row per client, `catalog check`
           clean, and every job that ended ok before the kill verifies.
  split    a job whose cartridges sit in two libraries: server a writes a job of
           --split-size (default 96M) on cartridges of --split-capacity (default
           64M), so it spans two; a is stopped, its second cartridge carried to b's
           library (as a person carries it between two rooms), and both started.
           The job is restored asked of a and asked of b, and one file of it asked
           of b: each time both servers read, each its own cartridge, and the
           restore is identical. A verify asked of b checks every file. With b
           killed, a restore fails in one line naming b and its cartridge.

  python3 bench/site.py
  python3 bench/site.py --clients 8 --size 4M
"""
import argparse, json, os, shutil, signal, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import default_work_parent, log, REPO  # noqa: E402
from clients import tl, make_tree, client_cmd, trees_equal  # noqa: E402
from catalog_scale import Postgres  # noqa: E402

SERVERS = {"a": "TA", "b": "TB"}


def psql(pg, db, sql):
    p = subprocess.run([os.path.join(pg.bin, "psql"), "-h", "127.0.0.1", "-p", str(pg.port), "-U",
                        "postgres", "-d", db, "-At", "-F", "\t", "-c", sql],
                       capture_output=True, text=True, check=True)
    return [line.split("\t") for line in p.stdout.splitlines() if line]


def start_server(a, home, config, log_path):
    env = dict(os.environ, RUST_LOG="info")
    err = open(log_path, "a")
    p = subprocess.Popen([a.bin, "--home", home, "server", "--listen", "127.0.0.1:0",
                          "--config", config], stdout=subprocess.PIPE, stderr=err, text=True,
                         env=env)
    url = p.stdout.readline().strip().removeprefix("listening on ")
    fp = p.stdout.readline().strip().removeprefix("certificate fingerprint (SHA-256) ")
    if not url.startswith("https://"):
        raise RuntimeError(f"the server did not start: see {log_path}")
    return p, url, fp


class Site:
    """Two homes on one catalog, their tokens, and their servers."""

    def __init__(self, a, pg, work, name, capacity="8G"):
        self.a, self.pg, self.db = a, pg, name
        self.dir = os.path.join(work, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        url = pg.database(name)
        self.homes, self.configs, self.procs, self.urls = {}, {}, {}, {}
        for s, prefix in SERVERS.items():
            home = os.path.join(self.dir, s, "home")
            os.makedirs(home)
            with open(os.path.join(home, "home.toml"), "w") as f:
                f.write(f'name = "{s}"\ncatalog = "{url}"\n')
            tl(a.bin, home, "library", "create", "--drives", str(a.drives), "--slots", "8",
               "--capacity", capacity, "--model", "lto3", "--clock", "real", "--scale",
               str(a.scale), "--prefix", prefix)
            config = os.path.join(self.dir, s, "server.toml")
            with open(config, "w") as f:
                f.write(f"[site]\nheartbeat_timeout_seconds = {a.heartbeat_timeout}\n")
            self.homes[s], self.configs[s] = home, config
        home_a = self.homes["a"]
        self.tokens = [tl(a.bin, home_a, "server", "token", "add", f"c{i}")["token"]
                       for i in range(a.clients)]
        self.admin = tl(a.bin, home_a, "server", "token", "add", "admin", "--admin")["token"]
        for s in SERVERS:
            self.start(s)

    def start(self, s):
        p, url, fp = start_server(self.a, self.homes[s], self.configs[s],
                                  os.path.join(self.dir, s, "server.log"))
        self.procs[s], self.urls[s] = p, (url, fp)

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    def jobs(self):
        rows = psql(self.pg, self.db, "SELECT id, name, status, host FROM jobs ORDER BY id")
        return [{"id": int(r[0]), "name": r[1], "status": r[2], "host": r[3]} for r in rows]

    def errors(self, job):
        return [r[0] for r in psql(self.pg, self.db,
                                   f"SELECT reason FROM job_errors WHERE job_id = {job}")]

    def send(self, i, src):
        s = "a" if i % 2 == 0 else "b"
        url, fp = self.urls[s]
        cmd = client_cmd(self.a.bin, url, fp, self.tokens[i], "--json", "backup", src,
                         "--set", f"c{i}", "--limit-rate", self.a.rate)
        return s, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def restore(self, i, job, via, out, *more):
        url, fp = self.urls[via]
        r = subprocess.run(client_cmd(self.a.bin, url, fp, self.tokens[i], "--json", "restore",
                                      str(job), *more, "--to", out), capture_output=True,
                           text=True)
        return r


def wait_all(procs):
    out = {}
    for i, (s, p) in procs.items():
        o, e = p.communicate()
        out[i] = {"pinned": s, "rc": p.returncode, "stderr": e.strip().splitlines()[-1:] or [""],
                  "doc": json.loads(o) if p.returncode == 0 and o.strip() else None}
    return out


def drives_that_wrote(results, jobs):
    host = {j["id"]: j["host"] for j in jobs}
    wrote = set()
    for r in results.values():
        if r["doc"]:
            for d in r["doc"]["drives"]:
                if d.get("bytes", 0) > 0:
                    wrote.add(f"{host.get(r['doc']['job_id'], '?')}/{d['drive']}")
    return sorted(wrote)


def restores(site, srcs, jobs, work):
    """Each job restored through the server that did not write it."""
    by_name = {j["name"]: j for j in jobs}
    out = []
    for i, src in enumerate(srcs):
        j = by_name.get(f"c{i}")
        if not j or j["status"] not in ("ok", "partial"):
            continue
        via = "b" if j["host"] == "a" else "a"
        dest = os.path.join(work, "out", f"c{i}")
        r = site.restore(i, j["id"], via, dest)
        same = r.returncode == 0 and trees_equal(src, dest)
        shutil.rmtree(dest, ignore_errors=True)
        out.append({"job": j["id"], "written_by": j["host"], "asked_of": via,
                    "sent_on": "sent on to server" in r.stderr, "identical": same})
        if not same:
            log(f"restore of job {j['id']} via {via}: {r.stderr.strip()}")
    return out


def case_all(a, pg, work, srcs):
    site = Site(a, pg, work, "all")
    try:
        t0 = time.monotonic()
        procs = {i: site.send(i, src) for i, src in enumerate(srcs)}
        results = wait_all(procs)
        wall = time.monotonic() - t0
        jobs = site.jobs()
        names = [j["name"] for j in jobs]
        failed = {i: r["stderr"] for i, r in results.items() if r["rc"] != 0}
        log(f"all: {len(jobs)} job rows in {wall:.1f} s; {len(failed)} clients failed")
        checked = restores(site, srcs, jobs, site.dir)
        return {
            "wall_seconds": round(wall, 1),
            "job_rows": len(jobs),
            "distinct_names": len(set(names)),
            "ok": sum(1 for j in jobs if j["status"] == "ok"),
            "by_server": {s: sum(1 for j in jobs if j["host"] == s) for s in SERVERS},
            "clients_failed": failed,
            "drives_that_wrote": drives_that_wrote(results, jobs),
            "restores": len(checked),
            "restored_identical": sum(1 for c in checked if c["identical"]),
            "restores_sent_on": sum(1 for c in checked if c["sent_on"]),
        }
    finally:
        site.stop()


def wait_until(what, secs, ok):
    until = time.monotonic() + secs
    while not ok():
        if time.monotonic() > until:
            raise RuntimeError(f"{what} did not happen within {secs} s")
        time.sleep(0.25)


def case_kill(a, pg, work, srcs):
    site = Site(a, pg, work, "kill")
    try:
        procs = {i: site.send(i, src) for i, src in enumerate(srcs)}
        half = len(srcs) // 2
        wait_until("half of the jobs beginning", 600, lambda: len(site.jobs()) >= half)
        before = site.jobs()
        ended_before = [j for j in before if j["status"] == "ok"]
        site.procs["a"].send_signal(signal.SIGKILL)
        site.procs["a"].wait()
        log(f"kill: server a killed with {len(before)} jobs begun "
            f"({sum(1 for j in before if j['host'] == 'a' and j['status'] == 'running')} running on a)")
        results = wait_all(procs)
        # a is taken for dead by b after the heartbeat timeout.
        wait_until("server a taken for dead", 10 * a.heartbeat_timeout + 60,
                   lambda: psql(pg, site.db, "SELECT state FROM servers WHERE name = 'a'")[0][0] == "dead")
        mid = site.jobs()
        cut = [j for j in mid if j["host"] == "a" and j["status"] == "failed"]
        reasons = {j["id"]: site.errors(j["id"]) for j in cut}
        site.start("a")
        wait_until("a resuming its jobs", 600, lambda: all(
            j["status"] != "running" for j in site.jobs()) and int(psql(
                pg, site.db, "SELECT COUNT(*) FROM staged_chunks c JOIN stages s ON s.id = c.stage_id "
                "WHERE s.host = 'a' AND c.state = 'spooled'")[0][0]) == 0)
        jobs = site.jobs()
        names = [j["name"] for j in jobs]
        after = {j["id"]: j for j in jobs}
        resumed = []
        for j in cut:
            now = after[j["id"]]
            errs = site.errors(j["id"])
            resumed.append({"job": j["id"], "status": now["status"], "errors": errs,
                            "reason_when_failed": [e for e in reasons[j["id"]] if "server a" in e][:1],
                            "names_cut": now["status"] != "partial" or any("cut" in e for e in errs)})
        check = tl(a.bin, site.homes["b"], "catalog", "check")
        verified = []
        for j in jobs:
            if j["status"] == "ok":
                v = tl(a.bin, site.homes[j["host"]], "verify", str(j["id"]))
                verified.append({"job": j["id"], "ok": v["ok"],
                                 "ended_before_kill": j["id"] in {e["id"] for e in ended_before}})
        checked = restores(site, srcs, jobs, site.dir)
        # A restore of a's job asked of b while a is down.
        site.procs["a"].send_signal(signal.SIGKILL)
        site.procs["a"].wait()
        wait_until("server a taken for dead again", 10 * a.heartbeat_timeout + 60,
                   lambda: psql(pg, site.db, "SELECT state FROM servers WHERE name = 'a'")[0][0] == "dead")
        a_job = next((j for j in jobs if j["host"] == "a" and j["status"] == "ok"), None)
        down = None
        if a_job:
            i = int(a_job["name"][1:])
            r = site.restore(i, a_job["id"], "b", os.path.join(site.dir, "out-down"))
            lines = r.stderr.strip().splitlines()
            down = {"job": a_job["id"], "exit": r.returncode, "lines": len(lines),
                    "message": lines[-1] if lines else "",
                    "names_a_and_cartridges": bool(lines) and "server a" in lines[-1]
                    and "TA0" in lines[-1]}
        unbegun_a = [i for i, r in results.items()
                     if r["pinned"] == "a" and r["rc"] == 0 and r["doc"]
                     and after.get(r["doc"]["job_id"], {}).get("host") == "b"]
        return {
            "clients_failed": {i: r["stderr"] for i, r in results.items() if r["rc"] != 0},
            "jobs_begun_at_kill": len(before),
            "job_rows": len(jobs),
            "distinct_names": len(set(names)),
            "statuses": {s: sum(1 for j in jobs if j["status"] == s)
                         for s in ("ok", "partial", "failed", "running")},
            "clients_pinned_to_a_finished_on_b": len(unbegun_a),
            "cut_on_a": len(cut),
            "cut_jobs": resumed,
            "restore_while_a_down": down,
            "catalog_check_problems": check.get("problems"),
            "verified": len(verified),
            "verified_ok": sum(1 for v in verified if v["ok"]),
            "verified_ok_of_those_ended_before_kill": sum(
                1 for v in verified if v["ok"] and v["ended_before_kill"]),
            "ended_before_kill": len(ended_before),
            "restores": len(checked),
            "restored_identical": sum(1 for c in checked if c["identical"]),
        }
    finally:
        site.stop()


def carry(barcode, home_from, home_to):
    """Moves cartridge `barcode` from the virtual library of `home_from` to that of
    `home_to` (both servers stopped): out of its slot or drive in one, into the
    place of an unwritten cartridge in the other."""
    def state(h):
        return os.path.join(h, "library", "library.json")

    def tapes(h):
        return os.path.join(h, "library", "tapes")
    with open(state(home_from)) as f:
        src = json.load(f)
    src["slots"] = [None if s == barcode else s for s in src["slots"]]
    src["drives"] = [None if d and d.get("barcode") == barcode else d for d in src["drives"]]
    with open(state(home_from), "w") as f:
        json.dump(src, f)
    with open(state(home_to)) as f:
        dst = json.load(f)
    free = [i for i, s in enumerate(dst["slots"])
            if s and not os.path.exists(os.path.join(tapes(home_to), f"{s}.data"))]
    dst["slots"][free[-1]] = barcode
    with open(state(home_to), "w") as f:
        json.dump(dst, f)
    for ext in ("data", "idx"):
        os.rename(os.path.join(tapes(home_from), f"{barcode}.{ext}"),
                  os.path.join(tapes(home_to), f"{barcode}.{ext}"))


def timed_restore(site, job, via, out, src, *more):
    t0 = time.monotonic()
    r = site.restore(0, job, via, out, *more)
    secs = time.monotonic() - t0
    doc = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
    same = r.returncode == 0 and trees_equal(src, out)
    shutil.rmtree(out, ignore_errors=True)
    said = [line for line in r.stderr.splitlines() if "parts" in line]
    if not same:
        log(f"split: restore via {via}: {r.stderr.strip()}")
    return {"asked_of": via, "exit": r.returncode, "identical": same,
            "seconds": round(secs, 2), "said": said[:1],
            "mounts": doc.get("mounts"), "blocks_read": doc.get("blocks_read")}


def case_split(a, pg, work, srcs):
    site = Site(a, pg, work, "split", capacity=a.split_capacity)
    try:
        src = os.path.join(site.dir, "src")
        make_tree(src, 99, int(a.split_size.rstrip("M")) << 20)
        url, fp = site.urls["a"]
        r = subprocess.run(client_cmd(a.bin, url, fp, site.tokens[0], "--json", "backup", src,
                                      "--set", "split"), capture_output=True, text=True)
        doc = json.loads(r.stdout)
        job, vols = doc["job_id"], doc["volumes"]
        log(f"split: job {job} on {vols}")
        for s in ("a", "b"):
            site.procs[s].send_signal(signal.SIGTERM)
            site.procs[s].wait()
        carry(vols[-1], site.homes["a"], site.homes["b"])
        for s in ("a", "b"):
            site.start(s)
        restores_ = [timed_restore(site, job, via, os.path.join(site.dir, f"out-{via}"), src)
                     for via in ("a", "b")]
        # One file: the biggest of the tree, which lies on both cartridges.
        big = max((os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs),
                  key=os.path.getsize)
        rel = os.path.relpath(big, src)
        one = os.path.join(site.dir, "one")
        r1 = site.restore(0, job, "b", one, rel)
        with open(big, "rb") as f1:
            want = f1.read()
        got = None
        if r1.returncode == 0:
            with open(os.path.join(one, rel), "rb") as f2:
                got = f2.read()
        v = subprocess.run(client_cmd(a.bin, *site.urls["b"], site.admin, "--json", "verify",
                                      str(job)), capture_output=True, text=True)
        verified = json.loads(v.stdout) if v.returncode == 0 else {"error": v.stderr.strip()}
        site.procs["b"].send_signal(signal.SIGKILL)
        site.procs["b"].wait()
        wait_until("server b taken for dead", 10 * a.heartbeat_timeout + 60,
                   lambda: psql(pg, site.db, "SELECT state FROM servers WHERE name = 'b'")[0][0] == "dead")
        r2 = site.restore(0, job, "a", os.path.join(site.dir, "out-down"))
        lines = r2.stderr.strip().splitlines()
        return {
            "job": job,
            "volumes": vols,
            "restores": restores_,
            "one_file": {"path": rel, "bytes": len(want), "exit": r1.returncode,
                         "identical": got == want},
            "verify_asked_of_b": {k: verified.get(k) for k in
                                  ("ok", "files_checked", "blocks_checked", "error")},
            "with_b_down": {"exit": r2.returncode, "lines": len(lines),
                            "message": lines[-1] if lines else ""},
        }
    finally:
        site.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--drives", type=int, default=2)
    ap.add_argument("--size", default="16M")
    ap.add_argument("--rate", default="4MB")
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--heartbeat-timeout", type=int, default=10)
    ap.add_argument("--split-size", default="96M")
    ap.add_argument("--split-capacity", default="64M")
    ap.add_argument("--cases", default="all,kill,split")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = a.work or os.path.join(default_work_parent(), "tapeloom-site")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    size = int(a.size.rstrip("M")) << 20
    srcs = []
    for i in range(a.clients):
        src = os.path.join(work, "src", f"c{i}-job")
        make_tree(src, i, size)
        srcs.append(src)
    pg_dir = os.path.join(work, "pg")
    os.makedirs(pg_dir)
    pg = Postgres(pg_dir)
    out = {"bench": "site", "clients": a.clients, "size_per_client": a.size, "rate": a.rate,
           "drives_per_server": a.drives, "scale": a.scale,
           "heartbeat_timeout_seconds": a.heartbeat_timeout}
    try:
        for case in a.cases.split(","):
            log(f"case {case}")
            out[case] = {"all": case_all, "kill": case_kill, "split": case_split}[case](a, pg, work, srcs)
    finally:
        pg.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
