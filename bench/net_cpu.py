#!/usr/bin/env python3
"""CPU seconds of a backup through the server against the same backup run locally,
on loopback with no drive model: one JSON document on stdout (progress on stderr).

The tree is `gen --preset hp-typical --total 1G` (kept in --work between runs) and
is read once before the first round, so that every backup finds it in the page
cache. Then, alternately, --rounds times:

  local    `backup TREE` into a fresh home (default virtual library).
  server   `backup TREE --server URL` to one server on 127.0.0.1 (its own home,
           started once and kept running).

CPU seconds are user + system: the local command's and the client's from
getrusage(RUSAGE_CHILDREN), the server's from /proc/PID/stat before and after the
job. GiB is the job's data bytes (`bytes` in the client's document). The targets:
server CPU per GiB <= 0.6 s and (client + server) / local CPU <= 1.6.

The document also holds `floor`: what TLS over loopback and the server's file
work cost alone on this machine, with no backup around them (`bench/transport.py`:
tapeloom's own rustls, Python's OpenSSL for comparison, and the stage's and the
cartridge's writes done with plain system calls). A server must receive and
decrypt every byte, stage it durably (so that what it acknowledged survives a
kill), read it back and write it to the cartridge, so its CPU per GiB is at
least `server_floor_s_per_gib` = rustls's TLS receive + stage write + stage
read + cartridge write, the cheaper of buffered and O_DIRECT
(`tls_floor_s_per_gib` is the first term alone). The
client and the server together do all the local backup's work, move every byte
through TLS and stage it, so their ratio to the local backup is at least
`ratio_floor` = 1 + (TLS send + receive + stage write + read) / local CPU.
--no-floor leaves it out.

  python3 bench/net_cpu.py
  python3 bench/net_cpu.py --rounds 5 --bin /tmp/tapeloom --work /var/tmp/tl-cpu
"""
import argparse, json, os, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import default_work_parent, log, REPO  # noqa: E402
from net_speed import proc_cpu, timed  # noqa: E402
from clients import start_server  # noqa: E402
from transport import floor  # noqa: E402

TARGET_SERVER_CPU_PER_GIB = 0.6
TARGET_CPU_RATIO = 1.6


def warm(tree):
    """Reads every file of `tree` once; returns the bytes read."""
    n = 0
    for root, _, files in os.walk(tree):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                while b := f.read(1 << 22):
                    n += len(b)
    return n


def new_home(bin_, home):
    shutil.rmtree(home, ignore_errors=True)
    subprocess.run([bin_, "--home", home, "--json", "library", "create", "--drives", "1",
                    "--slots", "16", "--capacity", "64G"], check=True, capture_output=True)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--total", default="1G", help="size of the hp-typical tree")
    ap.add_argument("--work", default=None, help="scratch folder; the tree is kept there")
    ap.add_argument("--no-floor", action="store_true", help="leave out TLS over loopback alone")
    a = ap.parse_args()
    work = a.work or os.path.join(default_work_parent(), "tapeloom-net-cpu")
    src = os.path.join(work, f"src-{a.total}")
    lhome, shome = os.path.join(work, "local"), os.path.join(work, "served")
    if not os.path.isdir(src):
        log(f"making the hp-typical {a.total} tree")
        subprocess.run([a.bin, "gen", "--preset", "hp-typical", "--total", a.total, src],
                       check=True, capture_output=True)
    tree_bytes = warm(src)
    log(f"page cache warmed: {tree_bytes} bytes read")
    new_home(a.bin, shome)
    token = json.loads(subprocess.run([a.bin, "--home", shome, "--json", "server", "token", "add", "c"],
                                      check=True, capture_output=True, text=True).stdout)["token"]
    server, url, fp = start_server(a.bin, shome, None)
    remote = ["--server", url, "--fingerprint", fp, "--token", token]
    rows = []
    try:
        for r in range(a.rounds):
            new_home(a.bin, lhome)
            lw, lc, _ = timed([a.bin, "--home", lhome, "--json", "backup", src])
            shutil.rmtree(lhome, ignore_errors=True)
            s0 = proc_cpu(server.pid)
            nw, cc, doc = timed([a.bin, "--json", "backup", src, *remote])
            sc = proc_cpu(server.pid) - s0
            gib = json.loads(doc)["bytes"] / (1 << 30)
            rows.append({
                "local_cpu_s": round(lc, 3), "local_wall_s": round(lw, 3),
                "client_cpu_s": round(cc, 3), "server_cpu_s": round(sc, 3),
                "server_wall_s": round(nw, 3), "gib": round(gib, 4),
                "server_cpu_s_per_gib": round(sc / gib, 3),
                "cpu_ratio": round((cc + sc) / lc, 3), "wall_ratio": round(nw / lw, 3),
            })
            log(f"round {r}: {rows[-1]}")
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(shome, ignore_errors=True)
        shutil.rmtree(lhome, ignore_errors=True)
    med = {k: round(median([row[k] for row in rows]), 3) for k in rows[0]}
    out = {
        "bench": "net_cpu", "cores": os.cpu_count(), "tree": f"hp-typical {a.total}",
        "page_cache": f"warm: the tree was read once ({tree_bytes} bytes) before the first round",
        "rounds": rows, "median": med,
        "targets": {"server_cpu_s_per_gib": TARGET_SERVER_CPU_PER_GIB, "cpu_ratio": TARGET_CPU_RATIO},
        "met": {"server_cpu_s_per_gib": med["server_cpu_s_per_gib"] <= TARGET_SERVER_CPU_PER_GIB,
                "cpu_ratio": med["cpu_ratio"] <= TARGET_CPU_RATIO},
    }
    if not a.no_floor:
        log("measuring TLS over loopback alone")
        f = floor(1.0, a.rounds)
        tls, files = f["rustls"]["tls"], f["files"]
        stage = files["stage_write_cpu_s_per_gib"] + files["stage_read_cpu_s_per_gib"]
        f["tls_floor_s_per_gib"] = tls["recv_cpu_s_per_gib"]
        cartridge = min(files["cartridge_cpu_s_per_gib"], files["cartridge_direct_cpu_s_per_gib"])
        f["server_floor_s_per_gib"] = round(tls["recv_cpu_s_per_gib"] + stage + cartridge, 3)
        added = tls["send_cpu_s_per_gib"] + tls["recv_cpu_s_per_gib"] + stage
        f["ratio_floor"] = round(1 + added * med["gib"] / med["local_cpu_s"], 3)
        f["server_to_floor"] = round(med["server_cpu_s_per_gib"] / f["server_floor_s_per_gib"], 3)
        f["ratio_to_floor"] = round(med["cpu_ratio"] / f["ratio_floor"], 3)
        out["floor"] = f
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
