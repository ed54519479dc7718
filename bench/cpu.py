#!/usr/bin/env python3
"""CPU per GB the engine spends on a backup, three ways, and the cores a media
server needs per drive of each LTO generation (as Table 5 of the 2004 sizing
guide does for its servers). One JSON document on stdout.

Each way backs up the same generator source, `gen:hp-typical:SIZE:1` (2:1 data
made in memory, so no source disk is read), to one LTO-9 model that keeps no
payload (`library create --payload none`) on the virtual clock: the job runs as
fast as this machine lets it, and only its CPU is measured.

  direct   `backup SOURCE` in one process.
  staged   `backup --via stage SOURCE`: the data goes to a disk stage first and
           is despooled from it.
  server   `backup SOURCE --server URL` from a client to a server on 127.0.0.1:
           the client reads and sends, the server receives it over TLS, spools
           it and writes it.

CPU seconds are user + system: a command's from getrusage(RUSAGE_CHILDREN), the
server's from /proc/PID/stat before and after the job (the server runs nothing
else meanwhile). GB is the job's data bytes (10^9). The generator's own work
(making the data) is part of every figure, as reading files would be.

`cores_per_drive` is, for each generation, its top host rate for 2:1 data (the
native rate times two, under the interface's limit) times each way's CPU per GB:
the cores a server keeps busy to feed one drive of that generation at full
speed. `tapeloom plan --cpu-per-gb` takes the figure of the way a site runs.

  python3 bench/cpu.py
  python3 bench/cpu.py --size 4G --only direct,server
"""
import argparse, json, os, resource, shutil, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Fail, log, parse_size, tapeloom_ok, REPO  # noqa: E402
from net_speed import proc_cpu  # noqa: E402
from clients import start_server  # noqa: E402

WAYS = ("direct", "staged", "server")
GENERATIONS = ("lto3", "lto5", "lto6", "lto7", "lto8", "lto9", "lto10")


def run(cmd):
    """Runs `cmd`: (wall seconds, CPU seconds of it, its JSON)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise Fail(f"{' '.join(cmd[1:4])} failed ({p.returncode}): {p.stderr.strip()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(p.stdout)


def new_home(a, home):
    shutil.rmtree(home, ignore_errors=True)
    tapeloom_ok(a.bin, home, ["library", "create", "--drives", 1, "--slots", 4,
                              "--capacity", "40T", "--model", "lto9", "--clock", "virtual",
                              "--payload", "none"])


def way(a, name):
    home = os.path.join(a.work, name)
    new_home(a, home)
    source = f"gen:hp-typical:{a.size}:1"
    log(f"{name}: backup of {source}")
    server_cpu = 0.0
    if name == "direct":
        wall, cpu, job = run([a.bin, "--home", home, "--json", "backup", source])
    elif name == "staged":
        tapeloom_ok(a.bin, home, ["stage", "add", os.path.join(home, "stage"), "--size", a.stage])
        wall, cpu, job = run([a.bin, "--home", home, "--json", "backup", "--via", "stage", source])
    else:
        token = tapeloom_ok(a.bin, home, ["server", "token", "add", "c"])["token"]
        server, url, fp = start_server(a.bin, home, None)
        try:
            s0 = proc_cpu(server.pid)
            wall, cpu, job = run([a.bin, "--json", "backup", source, "--server", url,
                                  "--fingerprint", fp, "--token", token])
            # The server's job may still be ending (its index, its catalog) when
            # the client has its answer: wait until its CPU stops growing.
            last = proc_cpu(server.pid)
            for _ in range(50):
                time.sleep(0.2)
                now = proc_cpu(server.pid)
                if now == last:
                    break
                last = now
            server_cpu = last - s0
        finally:
            server.kill()
            server.wait()
    shutil.rmtree(home, ignore_errors=True)
    gb = job["bytes"] / 1e9
    total = cpu + server_cpu
    out = {"bytes": job["bytes"], "wall_seconds": round(wall, 2),
           "cpu_seconds": round(total, 2), "cpu_seconds_per_gb": round(total / gb, 3)}
    if name == "server":
        out["client_cpu_seconds_per_gb"] = round(cpu / gb, 3)
        out["server_cpu_seconds_per_gb"] = round(server_cpu / gb, 3)
    log(f"{name}: {out}")
    return out


def top_rates(a):
    """Each generation's top host rate for 2:1 data, in MB/s."""
    code = subprocess.run([a.bin, "--json", "drive", "models"], capture_output=True, text=True)
    models = {m["name"]: m for m in json.loads(code.stdout)["models"]}
    return {g: min(models[g]["native_mb_per_s"] * 2, models[g]["interface_mb_per_s"])
            for g in GENERATIONS if g in models}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-cpu-bench")
    ap.add_argument("--size", default="8G", help="data per way (default 8G)")
    ap.add_argument("--stage", default="2G", help="the stage's size for the staged way")
    ap.add_argument("--only", default=",".join(WAYS), help="ways, separated by commas")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    parse_size(a.size)
    os.makedirs(a.work, exist_ok=True)
    out = {"benchmark": "cpu", "cores_here": os.cpu_count(),
           "settings": {"size": a.size, "model": "lto9", "clock": "virtual", "payload": "none"}}
    t0 = time.monotonic()
    names = a.only.split(",")
    for n in names:
        if n not in WAYS:
            sys.exit(f"no way {n} (ways: {', '.join(WAYS)})")
        try:
            out[n] = way(a, n)
        except Fail as e:
            out[n] = {"error": str(e)}
    rates = top_rates(a)
    out["cores_per_drive"] = [
        {"generation": g, "top_mb_per_s_2to1": r,
         **{n: round(out[n]["cpu_seconds_per_gb"] * r / 1000, 2)
            for n in names if "cpu_seconds_per_gb" in out[n]}}
        for g, r in rates.items()]
    out["pass"] = all("cpu_seconds_per_gb" in out[n] for n in names)
    out["seconds"] = round(time.monotonic() - t0, 1)
    shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
