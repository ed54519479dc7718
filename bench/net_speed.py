#!/usr/bin/env python3
"""One client through the server against the same job run locally, on loopback
with no drive model: one JSON document on stdout (progress on stderr).

The tree is `gen --preset hp-typical --total 2G` (kept in --work between runs). In
one run, alternately, --rounds times each:

  backup   `backup TREE` on the server's home, then `backup TREE --server URL`
           (the client packs, the server checks and writes).
  restore  `restore JOB --to DIR` on the server's home and the same through the
           server (the server reads, the client checks and places), each first
           in turn (on this machine the second of two 2 GiB restores pays for the
           first's pages). As root, the page cache is dropped before each restore
           and the cartridges read back into it (`restore_cache_settled`).

For each it reports the wall times, their ratio (local / through the server, the
acceptance's "80% or more"), and the CPU seconds of each process: the local
command, the client, and the server (from /proc/PID/stat). On one machine the
client and the server share its cores, so the wall time through the server is at
least (client CPU + server CPU) / cores; `same_host_bound` is that ratio's best.
`separate_hosts_bound` is the ratio's best when client and server each have this
machine's cores to themselves, the slower side's CPU seconds over its cores (a
model from measured figures, not a measurement).

  python3 bench/net_speed.py
  python3 bench/net_speed.py --rounds 5 --work /var/tmp/tl-speed
"""
import argparse, json, os, resource, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import default_work_parent, log, REPO  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def timed(cmd):
    """Runs `cmd`: (wall seconds, CPU seconds of it and its children, stdout). The
    page cache's dirty pages are written out first, so that no run pays for the
    writeback of the one before."""
    os.sync()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stdout


def settle(home):
    """Before a restore: the page cache emptied (as root) and the home's cartridge
    files read back into it, so that each restore starts from the same cache: its
    blocks in memory, no other pages to reclaim. False when the cache cannot be
    dropped (not root)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        return False
    for root, _, files in os.walk(home):
        for n in files:
            with open(os.path.join(root, n), "rb") as f:
                while f.read(1 << 22):
                    pass
    return True


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = a.work or os.path.join(default_work_parent(), "tapeloom-net-speed")
    src, home = os.path.join(work, "src"), os.path.join(work, "home")
    if not os.path.isdir(src):
        log("making the hp-typical 2 GiB tree")
        subprocess.run([a.bin, "gen", "--preset", "hp-typical", "--total", "2G", src],
                       check=True, capture_output=True)
    shutil.rmtree(home, ignore_errors=True)
    tl = [a.bin, "--home", home, "--json"]
    subprocess.run(tl + ["library", "create", "--drives", "1", "--slots", "16",
                         "--capacity", "64G"], check=True, capture_output=True)
    token = json.loads(subprocess.run(tl + ["server", "token", "add", "c"], check=True,
                                      capture_output=True, text=True).stdout)["token"]
    server = subprocess.Popen([a.bin, "--home", home, "server", "--listen", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = server.stdout.readline().strip().removeprefix("listening on ")
    fp = server.stdout.readline().strip().removeprefix("certificate fingerprint (SHA-256) ")
    remote = ["--server", url, "--fingerprint", fp, "--token", token]
    cores = os.cpu_count() or 1
    out = {"bench": "net_speed", "cores": cores, "backup": [], "restore": []}
    try:
        job = None
        for r in range(a.rounds):
            # Each in a set of its own: a client may not add to the server's sets.
            lw, lc, _ = timed(tl + ["backup", src, "--set", "local"])
            s0 = proc_cpu(server.pid)
            nw, nc, doc = timed([a.bin, "--json", "backup", src, "--set", "client", *remote])
            sc = proc_cpu(server.pid) - s0
            job = json.loads(doc)["job_id"]
            out["backup"].append(round_row(lw, lc, nw, nc, sc, cores))
            log(f"backup {r}: local {lw:.2f} s, through the server {nw:.2f} s")
            # Cartridges of the jobs not restored go, to keep the disk.
            for d in ("outl", "outn"):
                shutil.rmtree(os.path.join(work, d), ignore_errors=True)
        for r in range(a.rounds):
            for d in ("outl", "outn"):
                shutil.rmtree(os.path.join(work, d), ignore_errors=True)

            def local():
                out["restore_cache_settled"] = settle(home)
                return timed(tl + ["restore", str(job), "--to", os.path.join(work, "outl")])

            def through():
                out["restore_cache_settled"] = settle(home)
                s0 = proc_cpu(server.pid)
                nw, nc, _ = timed([a.bin, "--json", "restore", str(job), "--to",
                                   os.path.join(work, "outn"), *remote])
                return nw, nc, proc_cpu(server.pid) - s0

            # The second of two restores writing 2 GiB pays for the first's pages
            # on this machine: each goes first in turn.
            if r % 2 == 0:
                (lw, lc, _), (nw, nc, sc) = local(), through()
            else:
                (nw, nc, sc), (lw, lc, _) = through(), local()
            out["restore"].append(round_row(lw, lc, nw, nc, sc, cores))
            log(f"restore {r}: local {lw:.2f} s, through the server {nw:.2f} s")
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(home, ignore_errors=True)
        for d in ("outl", "outn"):
            shutil.rmtree(os.path.join(work, d), ignore_errors=True)
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)
    for k in ("backup", "restore"):
        rows = out[k]
        out[k + "_best_ratio"] = max(r["ratio"] for r in rows)
        out[k + "_median_ratio"] = sorted(r["ratio"] for r in rows)[len(rows) // 2]
    print(json.dumps(out, indent=2))


def round_row(lw, lc, nw, nc, sc, cores):
    return {
        "local_seconds": round(lw, 3), "local_cpu_seconds": round(lc, 3),
        "server_path_seconds": round(nw, 3), "client_cpu_seconds": round(nc, 3),
        "server_cpu_seconds": round(sc, 3), "ratio": round(lw / nw, 3),
        "same_host_bound": round(lw / max((nc + sc) / cores, 1e-9), 3),
        "separate_hosts_bound": round(lw / max(nc / cores, sc / cores, 1e-9), 3),
    }


if __name__ == "__main__":
    main()
