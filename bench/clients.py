#!/usr/bin/env python3
"""Many slow clients through one server and one drive: one JSON document on stdout
(progress on stderr).

A home whose library has one LTO-3 drive at --scale (default 0.25: 20 MB/s, its
lowest speed step 6.75 MB/s, a 32 MB buffer) on the real clock, so that a drive
left without data runs dry and backhitches as it would. --clients client processes
(default 16), each with its own token, each backing up its own tree (one file of
--size bytes of noise, default 48 MB, and a few small files) through the server at
once, each held to --rate (default 2 MB/s, below the drive's lowest step alone).

  spooled   The server's defaults: a slow client's job waits on the spool until it
            is whole, then the drive writes it at the spool's speed. Pass: every
            job ends ok, verifies (`verify JOB` on the server's home) and restores
            identical through the server with its own client's token; the drive
            shows 0 backhitches in every job (while the data streamed; the stop
            after each job's final flush is counted apart).
  at_once   For contrast (reported, not judged), the same with the server's start
            rate set to 0: each job goes to the drive as soon as it is let in and
            its blocks come at its client's pace.

  python3 bench/clients.py
  python3 bench/clients.py --clients 4 --size 24MB --only spooled
"""
import argparse, filecmp, json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import default_work_parent, log, parse_size, REPO  # noqa: E402


def tl(bin_, home, *args, timeout=3600):
    p = subprocess.run([bin_, "--home", home, "--json", *args], capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"tapeloom {' '.join(args)}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def make_tree(src, seed, size):
    os.makedirs(os.path.join(src, "small"), exist_ok=True)
    with open(os.path.join(src, "big"), "wb") as f:
        left = size
        while left > 0:
            n = min(left, 1 << 20)
            f.write(os.urandom(n))
            left -= n
    for i in range(3):
        with open(os.path.join(src, "small", str(i)), "wb") as f:
            f.write(os.urandom(5000 + seed))


def start_server(bin_, home, config):
    cmd = [bin_, "--home", home, "server", "--listen", "127.0.0.1:0"]
    if config:
        cmd += ["--config", config]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = p.stdout.readline().strip().removeprefix("listening on ")
    fp = p.stdout.readline().strip().removeprefix("certificate fingerprint (SHA-256) ")
    return p, url, fp


def client_cmd(bin_, url, fp, token, *args):
    return [bin_, *args, "--server", url, "--fingerprint", fp, "--token", token]


def client_docs(procs, name):
    """Each client process's `--json` document, once it ended; an error names the
    first client that failed."""
    docs = []
    for i, p in enumerate(procs):
        out, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"{name}client {i}: {err.strip()}")
        docs.append(json.loads(out))
    return docs


def trees_equal(a, b):
    c = filecmp.dircmp(a, b)
    if c.left_only or c.right_only or c.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, c.common_files, shallow=False)
    if mismatch or errors:
        return False
    return all(trees_equal(os.path.join(a, d), os.path.join(b, d)) for d in c.common_dirs)


def run_case(a, work, name, start_rate):
    home = os.path.join(work, name, "home")
    tl(a.bin, home, "library", "create", "--drives", "1", "--slots", "4", "--capacity", "8G",
       "--model", "lto3", "--clock", "real", "--scale", str(a.scale))
    tokens = [tl(a.bin, home, "server", "token", "add", f"c{i}")["token"] for i in range(a.clients)]
    admin = tl(a.bin, home, "server", "token", "add", "admin", "--admin")["token"]
    srcs = []
    for i in range(a.clients):
        src = os.path.join(work, "src", f"c{i}")
        if not os.path.exists(src):
            make_tree(src, i, a.size)
        srcs.append(src)
    config = None
    if start_rate is not None:
        config = os.path.join(work, name, "server.toml")
        with open(config, "w") as f:
            f.write(f"[queue]\nstart_rate_mb_s = {start_rate}\n")
    server, url, fp = start_server(a.bin, home, config)
    try:
        log(f"{name}: {a.clients} clients at {a.rate} each")
        t0 = time.monotonic()
        procs = [subprocess.Popen(client_cmd(a.bin, url, fp, tok, "--json", "backup", src,
                                             "--limit-rate", a.rate),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for src, tok in zip(srcs, tokens)]
        most_in, most_spooled, all_received = 0, 0, None  # all_received: no job left waiting or receiving
        while any(p.poll() is None for p in procs):
            q = subprocess.run(client_cmd(a.bin, url, fp, admin, "--json", "queue"),
                               capture_output=True, text=True)
            if q.returncode == 0:
                d = json.loads(q.stdout)
                inside = [e for e in d["queue"] if e["state"] in ("receiving", "writing")]
                most_in = max(most_in, len(inside))
                most_spooled = max(most_spooled, d["spool_used_bytes"])
                if all_received is None and len(d["recent"]) + len(d["queue"]) == a.clients and \
                        all(e["state"] != "receiving" for e in d["queue"]):
                    all_received = time.monotonic() - t0
            time.sleep(0.5)
        wall = time.monotonic() - t0
        docs = client_docs(procs, "")
        jobs = []
        for i, d in enumerate(docs):
            drive = d["drives"][0]
            v = tl(a.bin, home, "verify", str(d["job_id"]))
            out = os.path.join(work, name, "out", f"c{i}")
            r = subprocess.run(client_cmd(a.bin, url, fp, tokens[i], "--json", "restore",
                                          str(d["job_id"]), "--to", out),
                               capture_output=True, text=True)
            same = r.returncode == 0 and trees_equal(srcs[i], out)
            jobs.append({"client": f"c{i}", "job_id": d["job_id"], "status": d["status"],
                         "bytes": d["bytes"], "seconds": round(d["seconds"], 2),
                         "data_mb_per_s": round(d["data_mb_per_s"], 2),
                         "backhitches": drive["backhitches"],
                         "stops_after_data": drive["stops_after_data"],
                         "verified": v["ok"], "restored_identical": same})
            shutil.rmtree(out, ignore_errors=True)
            log(f"{name}: c{i} job {d['job_id']} {d['status']} {drive['backhitches']} backhitches, "
                f"verify {v['ok']}, restore {'same' if same else 'DIFFERENT'}")
        return {
            "clients": a.clients, "rate": a.rate, "size_per_client": a.size,
            "start_rate_mb_s": start_rate, "wall_seconds": round(wall, 1),
            "seconds_until_last_job_on_a_drive": None if all_received is None else round(all_received, 1),
            "most_jobs_let_in_at_once": most_in, "most_spooled_bytes": most_spooled,
            "backhitches": sum(j["backhitches"] for j in jobs),
            "all_ok": all(j["status"] == "ok" for j in jobs),
            "all_verified": all(j["verified"] for j in jobs),
            "all_restored_identical": all(j["restored_identical"] for j in jobs),
            "jobs": jobs,
        }
    finally:
        server.kill()
        server.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--rate", default="2MB")
    ap.add_argument("--size", default="48MB")
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--only", default="spooled,at_once")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    a.size = parse_size(a.size)
    work = a.work or tempfile.mkdtemp(prefix="tapeloom-clients-", dir=default_work_parent())
    only = a.only.split(",")
    out = {"bench": "clients", "scale": a.scale}
    try:
        if "spooled" in only:
            out["spooled"] = run_case(a, work, "spooled", None)
        if "at_once" in only:
            out["at_once"] = run_case(a, work, "at_once", 0)
        s = out.get("spooled")
        out["pass"] = bool(s) and s["all_ok"] and s["all_verified"] and \
            s["all_restored_identical"] and s["backhitches"] == 0
    finally:
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=2))
    sys.exit(0 if out["pass"] else 1)


if __name__ == "__main__":
    main()
