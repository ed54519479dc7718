#!/usr/bin/env python3
"""The engine's benchmark suite: weaving, streaming, restore positioning, memory, and
tapeloom against `tar | mbuffer`, in one run, as one JSON document on stdout.

Every experiment runs in its own fresh home under --work, on a library made with
`tapeloom library create --model lto3 --clock real --scale 0.25` (LTO-3 at a quarter of
its rates and buffers, taking real time) unless said. Sources come from
`tapeloom gen --preset hp-typical`, one folder per stream. Every tapeloom command runs
with --json and every figure below comes from those documents (or from wall clocks).
Rates are in MB/s with MB = 10^6 bytes, as tapeloom parses `8MB` (`8M` is 8 MiB).

  weave4      Four streams of 8 MB/s each, --concurrency auto, one drive: does weaving
              keep the drive streaming? Pass: no backhitches and rate >= 0.97 x 32 MB/s.
  slow1       One 5 MB/s stream, --concurrency 1: below the lowest speed step the model
              must show backhitches (pass: > 0). Also tries `tapeloom report`.
  twodrives   Eight 8 MB/s streams with --drives 1, then --drives 2 on a 2-drive
              library. Pass: time ratio <= 0.55, each drive wrote, no backhitches.
  restore1    One stream of weave4's job restored with --stream, against (a) the same
              stream backed up alone and restored, (b) --skip-by read (reading
              through the other streams) and (c) --skip-by locate (locating over
              them). Pass: rate >= 0.95 x bound_mb_per_s and faster than reading
              through.
  restoreall  weave4's whole job restored: the tree equals the sources and the tape is
              read once. Pass: both.
  memory      Peak RSS of one large backup (--mem-size, default library without a
              model) against the buffer pool (--buffers x --block-size defaults read
              from `backup --help`). Pass: peak < pool + 64 MiB.
  vs_mbuffer  Backup and restore of a 2 GiB hp-typical tree and 100,000 small files by
              tapeloom (default library, no model) and by
              `tar -b 512 -cf - | mbuffer -m 1G -s 256k`, warm and cold page cache,
              the tools taking turns, best of --repeat. Pass: hp-typical backup ratio
              >= 1.0, small-files cold files/s ratio >= 1.5.

restore1 and restoreall use weave4's job, so selecting them runs weave4 too.
Cold cache needs root (`echo 3 > /proc/sys/vm/drop_caches`); mbuffer must be installed.

  python3 bench/engine.py --quick                      # everything, small sizes
  python3 bench/engine.py --only vs_mbuffer > out.json
  python3 bench/engine.py --only weave4,restore1 --bin /tmp/tapeloom --keep
"""
import argparse, json, math, os, platform, re, shlex, shutil, subprocess, sys
import tempfile, threading, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPERIMENTS = ["weave4", "slow1", "twodrives", "restore1", "restoreall", "memory", "vs_mbuffer"]
PRESET_CLASSES = {"hp-typical": (64 << 10, 64 << 20), "small-files": (4 << 10, 64 << 10)}
PRESET_DIRS = 1 + 4 + 16 + 64  # depth 3, breadth 4, as both presets are
T0 = time.monotonic()


class Fail(Exception):
    """A command failed; the experiment records the message and the suite goes on."""


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def parse_size(s):
    """Sizes as tapeloom reads them: K, M, G, T binary; KB, MB, GB, TB decimal."""
    m = re.fullmatch(r"\s*([\d.]+)\s*([A-Za-z]*)\s*", s)
    units = {"": 1, "B": 1, "K": 1 << 10, "KI": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
             "MI": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GI": 1 << 30, "GIB": 1 << 30,
             "T": 1 << 40, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
    if not m or m.group(2).upper() not in units:
        raise argparse.ArgumentTypeError(f"'{s}' is not a size (try 256M, 2G, 8MB)")
    return round(float(m.group(1)) * units[m.group(2).upper()])


def mbps(nbytes, seconds):
    return round(nbytes / 1e6 / seconds, 2) if seconds else None


def first_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return next((l for l in lines if "error" in l.lower()), lines[0] if lines else "")


def run(cmd, timeout=7200):
    """Runs cmd; returns (wall seconds, stdout, max RSS in bytes of it and its children).
    os.wait4 gives the rusage of this one child, whatever ran before it."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        _, status, ru = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t
        timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if p.returncode != 0:
        name = " ".join(cmd[:6]) if cmd[0] != "bash" else cmd[-1][:80]
        raise Fail(f"{name}: exit {p.returncode}: {first_line(stderr)}")
    return dt, stdout, ru.ru_maxrss * 1024


def shell(script):
    return run(["bash", "-o", "pipefail", "-c", script])[0]


def settle(cold):
    """Earlier steps' dirty pages must not be written back on this step's time."""
    os.sync()
    if cold:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    time.sleep(1)


class Bench:
    def __init__(self, a, work):
        self.a, self.work, self.n = a, work, 0
        self.sources, self.state = {}, {}

    def tl(self, home, *args, timeout=7200):
        """One tapeloom command with --json: (wall seconds, parsed JSON, max RSS)."""
        dt, out, rss = run([self.a.bin, "--home", home, "--json", *map(str, args)], timeout)
        try:
            return dt, json.loads(out), rss
        except ValueError:
            raise Fail(f"{args[0]}: output is not JSON: {out[:200]!r}")

    def path(self, name):
        self.n += 1
        return os.path.join(self.work, f"{self.n:02}-{name}")

    def home(self, name, drives=1, model=True):
        """A fresh home; with model, its library is the timed LTO model."""
        h = self.path(f"home-{name}")
        if model:
            self.tl(h, "library", "create", "--drives", drives, "--slots", 4,
                    "--capacity", "400G", "--model", self.a.model, "--clock", "real",
                    "--scale", self.a.scale)
        return h

    def gen(self, preset, total=None, seed=1, files=None):
        """A generated tree (made once per run). hp-typical grows --files-per-dir when
        the preset's 85 folders x 8 files cannot hold `total`; small-files gets exactly
        `files` files (a multiple of 5, one of each of its 5 size classes a round)."""
        key = (preset, total, seed, files)
        if key in self.sources:
            return self.sources[key]
        lo, hi = PRESET_CLASSES[preset]
        nclasses = hi.bit_length() - lo.bit_length() + 1
        rnd = (2 * hi - lo)  # one file of each power-of-two size class
        if files:
            total = files // nclasses * rnd
        rounds = total // rnd
        args = ["gen", "--preset", preset, "--total", total, "--seed", seed]
        fpd = math.ceil(rounds * nclasses / PRESET_DIRS)
        if files or fpd > 8:
            args += ["--files-per-dir", max(fpd, 1)]
        # Streams are named after their folder: s1, s2, ...
        d = os.path.join(self.path(f"src-{preset}"), f"s{seed}")
        log(f"gen {preset} {total / 1e9:.2f} GB seed {seed}")
        _, g, _ = self.tl(os.path.join(self.work, "gen-home"), *args, d)
        if g["files"] == 0 or (files and g["files"] != files):
            raise Fail(f"gen {preset} --total {total} made {g['files']} files")
        self.sources[key] = (d, g)
        return d, g

    def streams(self, n, seed0=1):
        return [self.gen("hp-typical", self.a.stream_size, seed0 + i)[0] for i in range(n)]


def drive_rows(job):
    return [{k: d.get(k) for k in ("drive", "bytes", "mb_per_s", "backhitches", "stops_after_data", "utilization",
                                   "compression_ratio", "modeled_seconds",
                                   "reader_wait_seconds", "writer_wait_seconds")} for d in job["drives"]]


def backup_summary(job, wall):
    # data_seconds: from the first cartridge mounted and positioned to the last data
    # block; the whole job also has the load (17 s on the LTO model), the label and
    # the index.
    data = job.get("data_seconds") or job["seconds"]
    return {"job_id": job["job_id"], "seconds": round(job["seconds"], 2), "wall_seconds": round(wall, 2),
            "data_seconds": round(data, 2), "data_mb_per_s": mbps(job["bytes"], data),
            "bytes": job["bytes"], "mb_per_s": mbps(job["bytes"], job["seconds"]),
            "blocks": job.get("blocks"), "max_concurrency": job.get("max_concurrency"),
            "drives": drive_rows(job),
            "streams": [{k: s.get(k) for k in ("name", "bytes", "files", "mb_per_s")} for s in job["streams"]]}


def tapeloom_json(binary, home, args, env=None, timeout=3600):
    """Runs `binary --home home --json args` with the variables `env` added and
    TAPELOOM_FAULTS removed unless `env` sets it: (exit code, JSON or None,
    stderr)."""
    full = dict(os.environ)
    full.pop("TAPELOOM_FAULTS", None)
    full.update(env or {})
    p = subprocess.run([binary, "--home", home, "--json", *map(str, args)], capture_output=True,
                       text=True, errors="replace", env=full, timeout=timeout)
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = None
    return p.returncode, doc, p.stderr.strip()


def tapeloom_ok(binary, home, args, env=None, timeout=3600):
    """`tapeloom_json` that insists on success: the JSON."""
    code, doc, err = tapeloom_json(binary, home, args, env, timeout)
    if code != 0:
        raise Fail(f"{args[0]} failed ({code}): {err[-300:]}")
    return doc


def same_tree(a, b):
    return subprocess.run(["diff", "-rq", a, b], stdout=subprocess.DEVNULL).returncode == 0


def weave4(b):
    rate = b.a.weave_rate
    home = b.home("weave4")
    srcs = b.streams(4)
    log("weave4: backup of 4 streams")
    wall, job, _ = b.tl(home, "backup", "--limit-rate", rate, "--concurrency", "auto", *srcs)
    res = backup_summary(job, wall)
    offered = 4 * parse_size(rate)
    res.update(limit_rate=rate, limit_bytes_per_s_each=parse_size(rate),
               units="MB = 10^6 bytes: tapeloom parses 8MB as 8,000,000 B/s (8M would be MiB)",
               offered_mb_per_s=offered / 1e6,
               fraction_of_offered_whole_job=round(job["bytes"] / job["seconds"] / offered, 3),
               fraction_of_offered=round(job["bytes"] / res["data_seconds"] / offered, 3))
    res["pass"] = all(d["backhitches"] == 0 for d in job["drives"]) and res["fraction_of_offered"] >= 0.97
    b.state["weave4"] = (home, job, {os.path.basename(s): s for s in srcs})
    return res


def slow1(b):
    home = b.home("slow1")
    log("slow1: backup of one slow stream")
    wall, job, _ = b.tl(home, "backup", "--limit-rate", b.a.slow_rate, "--concurrency", 1, *b.streams(1))
    res = backup_summary(job, wall)
    res["limit_rate"] = b.a.slow_rate
    for ext in ("png", "html"):
        out = b.path(f"report.{ext}")
        try:
            _, rep, _ = b.tl(home, "report", job["job_id"], "--out", out)
            res[f"report_{ext}"] = {"bytes": os.path.getsize(out), "json": rep}
        except (Fail, OSError) as e:
            res[f"report_{ext}"] = {"error": str(e)}
    res["pass"] = all(d["backhitches"] > 0 for d in job["drives"])
    return res


def twodrives(b):
    srcs = b.streams(8)
    res = {}
    for n in (1, 2):
        log(f"twodrives: backup of 8 streams with --drives {n}")
        try:
            home = b.home(f"drives{n}", drives=2)
            wall, job, _ = b.tl(home, "backup", "--limit-rate", b.a.weave_rate, "--drives", n, *srcs)
            res[f"drives{n}"] = backup_summary(job, wall)
        except Fail as e:
            res[f"drives{n}"] = {"error": str(e)}
    one, two = res["drives1"], res["drives2"]
    if "error" in one or "error" in two:
        res["pass"] = False
        return res
    res["time_ratio_whole_job"] = round(two["seconds"] / one["seconds"], 3)
    res["time_ratio"] = round(two["data_seconds"] / one["data_seconds"], 3)
    res["pass"] = (res["time_ratio"] <= 0.55 and len(two["drives"]) >= 2
                   and all(d["bytes"] > 0 and d["backhitches"] == 0 for d in two["drives"]))
    return res


def restore_stream(b, home, job_id, name, *extra):
    to = b.path(f"restore-{name}")
    wall, r, _ = b.tl(home, "restore", job_id, "--stream", name, "--to", to, *extra)
    shutil.rmtree(to, ignore_errors=True)
    # With a drive model the rate is over the modeled seconds (loads included), the
    # same time base as the model's bound.
    secs = r.get("modeled_seconds") or r["seconds"]
    return {"seconds": round(r["seconds"], 2), "wall_seconds": round(wall, 2), "bytes": r["bytes"],
            "mb_per_s": mbps(r["bytes"], secs), "bytes_read_from_tape": r.get("bytes_read_from_tape"),
            "locates": r.get("locates"), "read_through": r.get("read_through"),
            "modeled_seconds": r.get("modeled_seconds"), "bound_mb_per_s": r.get("bound_mb_per_s")}


def restore1(b):
    home, job, srcs = b.state["weave4"]
    name = job["streams"][0]["name"]
    log(f"restore1: restore of stream {name} of the 4-stream job")
    res = {"stream": name, "stream_bytes": job["streams"][0]["bytes"]}
    res["interleaved"] = eng = restore_stream(b, home, job["job_id"], name)
    res["missing_fields"] = [k for k in ("modeled_seconds", "bound_mb_per_s") if eng[k] is None]
    log("restore1: the same stream alone on its own tape")
    try:
        h = b.home("alone")
        _, solo, _ = b.tl(h, "backup", "--limit-rate", b.a.weave_rate, "--concurrency", 1, srcs[name])
        res["alone"] = restore_stream(b, h, solo["job_id"], name)
        res["vs_alone"] = round(eng["mb_per_s"] / res["alone"]["mb_per_s"], 3)
    except Fail as e:
        res["alone"] = {"error": str(e)}
    log("restore1: read through the other streams")
    try:
        res["read_through"] = restore_stream(b, home, job["job_id"], name, "--skip-by", "read")
    except Fail as e:
        res["read_through"] = {"error": str(e)}
    log("restore1: locate over the other streams")
    try:
        res["locate_always"] = restore_stream(b, home, job["job_id"], name, "--skip-by", "locate")
    except Fail as e:
        res["locate_always"] = {"error": str(e)}
    bound, thru = eng["bound_mb_per_s"], res["read_through"].get("mb_per_s")
    res["vs_bound"] = round(eng["mb_per_s"] / bound, 3) if bound else None
    res["vs_read_through"] = round(eng["mb_per_s"] / thru, 3) if thru else None
    res["pass"] = bool(bound and thru and eng["mb_per_s"] >= 0.95 * bound and eng["mb_per_s"] > thru)
    return res


def restoreall(b):
    home, job, srcs = b.state["weave4"]
    _, jobs, _ = b.tl(home, "jobs")
    meta = next(j for j in jobs["jobs"] if j["job_id"] == job["job_id"])
    to = b.path("restore-all")
    log("restoreall: restore of the whole job")
    wall, r, _ = b.tl(home, "restore", job["job_id"], "--to", to)
    on_tape = job["blocks"] * meta["block_size"]
    res = {"seconds": round(r["seconds"], 2), "wall_seconds": round(wall, 2), "bytes": r["bytes"],
           "mb_per_s": mbps(r["bytes"], r["seconds"]), "bytes_read_from_tape": r.get("bytes_read_from_tape"),
           "locates": r.get("locates"), "mounts": r.get("mounts"), "job_bytes_on_tape": on_tape}
    res["missing_fields"] = [k for k in ("bytes_read_from_tape", "locates", "mounts") if res[k] is None]
    res["identical"] = all(same_tree(src, os.path.join(to, n)) for n, src in srcs.items())
    shutil.rmtree(to, ignore_errors=True)
    read = res["bytes_read_from_tape"]
    res["read_over_on_tape"] = round(read / on_tape, 3) if read else None
    res["pass"] = bool(res["identical"] and read and 0.95 <= read / on_tape <= 1.05)
    return res


def backup_defaults(b):
    text = subprocess.run([b.a.bin, "backup", "--help"], capture_output=True, text=True).stdout
    def default(flag):
        m = re.search(rf"--{flag} <[^>]*>\s*\n?.*?\[default: ([^\]]+)\]", text, re.S)
        if not m:
            raise Fail(f"no default for --{flag} in backup --help")
        return m.group(1)
    return int(default("buffers")), parse_size(default("block-size"))


def memory(b):
    buffers, block = backup_defaults(b)
    pool = buffers * block
    size = b.a.mem_size
    free = shutil.disk_usage(b.work).free
    res = {"size": size, "buffers": buffers, "block_size": block, "pool_bytes": pool, "free_bytes": free}
    if free < 2.1 * size:
        res["error"] = f"not enough disk: {free / 1e9:.1f} GB free, the job needs about {2.1 * size / 1e9:.1f} GB"
        return res
    src, g = b.gen("hp-typical", size, seed=100)
    home = b.home("memory", model=False)
    log(f"memory: backup of {g['bytes'] / 1e9:.1f} GB")
    wall, job, rss = b.tl(home, "backup", src)
    res.update(files=g["files"], bytes=job["bytes"], seconds=round(job["seconds"], 2),
               mb_per_s=mbps(job["bytes"], job["seconds"]), peak_rss_bytes=rss,
               peak_over_pool_mib=round((rss - pool) / 2**20, 1), limit_bytes=pool + (64 << 20))
    res["pass"] = rss < pool + (64 << 20)
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(src, ignore_errors=True)
    del b.sources[("hp-typical", size, 100, None)]
    return res


def can_drop_caches():
    try:
        settle(True)
        return None
    except OSError as e:
        return f"cannot drop the page cache: {e}"


def empty_trash(trash):
    """Deletes the trees of earlier runs, then waits for the file system to settle."""
    if not trash:
        return
    for p in trash:
        shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.remove(p)
    trash.clear()
    os.sync()
    time.sleep(30)


def vs_one_tree(b, name, src, g):
    files, nbytes = g["files"], g["bytes"]
    res = {"files": files, "bytes": nbytes, "repeat": b.a.repeat}
    cold_error = can_drop_caches()
    for mode in ("warm", "cold"):
        if mode == "cold" and cold_error:
            res[mode] = {"error": cold_error}
            continue
        if mode == "warm":
            subprocess.run(["tar", "-cf", "/dev/null", "-C", src, "."], check=True)
        best = {}
        # Trees are deleted only between the timed steps' batches: on ext4 creating
        # files right after many were deleted runs at a third of the speed (measured
        # here with tar -x alone: 42 s against 14 s), which would charge one tool for
        # the other's clean-up.
        trash = []
        for r in range(b.a.repeat):
            order = ["mbuffer", "tapeloom"] if r % 2 == 0 else ["tapeloom", "mbuffer"]
            for tool in order:
                log(f"vs_mbuffer: {name} {mode} run {r + 1} {tool}")
                store, dest = b.path(f"{tool}-{name}"), b.path(f"{tool}-out-{name}")
                os.makedirs(dest)
                settle(mode == "cold")
                if tool == "mbuffer":
                    bt = shell(f"tar -b 512 -cf - -C {shlex.quote(src)} . | mbuffer -q -m 1G -s 256k -o {shlex.quote(store)}")
                    settle(mode == "cold")
                    rt = shell(f"mbuffer -q -i {shlex.quote(store)} -m 1G -s 256k | tar -b 512 -xf - -C {shlex.quote(dest)}")
                else:
                    bt, job, _ = b.tl(store, "backup", src)
                    settle(mode == "cold")
                    rt, _, _ = b.tl(store, "restore", job["job_id"], "--to", dest)
                for k, v in ((f"{tool}_backup", bt), (f"{tool}_restore", rt)):
                    best[k] = min(best.get(k, 1e18), v)
                trash.extend((store, dest))
                if shutil.disk_usage(b.work).free < 3 * nbytes:
                    empty_trash(trash)
        empty_trash(trash)
        row = {}
        for k, v in sorted(best.items()):
            row[k] = {"seconds": round(v, 2), "mb_per_s": mbps(nbytes, v), "files_per_s": round(files / v, 1)}
        for step in ("backup", "restore"):
            row[f"{step}_ratio"] = round(best[f"mbuffer_{step}"] / best[f"tapeloom_{step}"], 3)
        res[mode] = row
    return res


def vs_mbuffer(b):
    if not shutil.which("mbuffer"):
        return {"error": "mbuffer is not installed (apt-get install -y mbuffer)"}
    # tar -x reads whole 256 KiB records too: with its default 10 KiB records it stops
    # at the end-of-archive blocks and mbuffer fails writing the padding (EPIPE).
    res = {"command": "tar -b 512 -cf - -C SRC . | mbuffer -q -m 1G -s 256k -o FILE",
           "restore_command": "mbuffer -q -i FILE -m 1G -s 256k | tar -b 512 -xf - -C DIR",
           "ratio": "tapeloom rate / tar|mbuffer rate (above 1: tapeloom faster)"}
    trees = (("hp-typical", lambda: b.gen("hp-typical", b.a.hp_size, seed=200)),
             ("small-files", lambda: b.gen("small-files", seed=201, files=b.a.small_files)))
    for name, make in trees:
        try:
            src, g = make()
            res[name] = vs_one_tree(b, name, src, g)
        except Fail as e:
            res[name] = {"error": str(e)}
    hp, sf = res["hp-typical"], res["small-files"]
    hp_rows = [hp[m] for m in ("warm", "cold") if isinstance(hp.get(m), dict) and "backup_ratio" in hp[m]]
    res["pass"] = bool(hp_rows and all(r["backup_ratio"] >= 1.0 for r in hp_rows)
                       and "backup_ratio" in sf.get("cold", {}) and sf["cold"]["backup_ratio"] >= 1.5)
    return res


def machine(b):
    info = {"cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()}
    try:
        cpu = open("/proc/cpuinfo").read()
        info["cpu"] = re.search(r"model name\s*:\s*(.*)", cpu).group(1)
        mem = open("/proc/meminfo").read()
        info["memory_bytes"] = int(re.search(r"MemTotal:\s*(\d+)", mem).group(1)) * 1024
    except (OSError, AttributeError):
        pass
    info["work_fs"] = subprocess.run(["stat", "-f", "-c", "%T", b.work], capture_output=True, text=True).stdout.strip()
    info["work_free_bytes"] = shutil.disk_usage(b.work).free
    info["tapeloom"] = subprocess.run([b.a.bin, "--version"], capture_output=True, text=True).stdout.strip()
    info["bin"] = os.path.abspath(b.a.bin)
    return info


def default_work_parent():
    dev = os.stat(REPO).st_dev
    for d in ("/var/tmp", "/tmp"):
        if os.path.isdir(d) and os.stat(d).st_dev == dev:
            return d
    return os.path.join(REPO, "target")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", help="scratch folder; a fresh folder is made inside it "
                    "(default: a temp folder on the file system of the repository)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--only", help="experiments to run, comma separated: " + ",".join(EXPERIMENTS))
    ap.add_argument("--quick", action="store_true", help="small sizes, one repeat: a few minutes")
    ap.add_argument("--stream-size", type=parse_size, help="data per stream (default 256M; quick 128M, "
                    "hp-typical's smallest whole round of size classes)")
    ap.add_argument("--mem-size", type=parse_size, help="memory experiment job (default 20G; quick 1G)")
    ap.add_argument("--hp-size", type=parse_size, help="vs_mbuffer hp-typical tree (default 2G; quick 256M)")
    ap.add_argument("--small-files", type=int, help="vs_mbuffer small-files count, a multiple of 5 "
                    "(default 100000; quick 10000)")
    ap.add_argument("--repeat", type=int, help="vs_mbuffer: best of N (default 3; quick 1)")
    ap.add_argument("--weave-rate", default="8MB", help="per-stream source rate for weave4, twodrives, restore1")
    ap.add_argument("--slow-rate", default="5MB", help="source rate for slow1")
    ap.add_argument("--model", default="lto3")
    ap.add_argument("--scale", default="0.25")
    a = ap.parse_args()
    q = a.quick
    defaults = {"stream_size": "128M" if q else "256M", "mem_size": "1G" if q else "20G",
                "hp_size": "256M" if q else "2G"}
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, parse_size(v))
    a.small_files = a.small_files or (10_000 if q else 100_000)
    a.repeat = a.repeat or (1 if q else 3)
    only = a.only.split(",") if a.only else EXPERIMENTS
    unknown = set(only) - set(EXPERIMENTS)
    if unknown:
        ap.error(f"unknown experiments: {', '.join(sorted(unknown))}")
    if {"restore1", "restoreall"} & set(only) and "weave4" not in only:
        only = ["weave4"] + only
    if not os.access(a.bin, os.X_OK):
        ap.error(f"{a.bin} is not an executable (build it, or give --bin)")
    parent = a.work or default_work_parent()
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tapeloom-engine-", dir=parent)
    b = Bench(a, work)
    doc = {"benchmark": "engine", "machine": machine(b),
           "settings": {"quick": q, "model": a.model, "scale": a.scale, "clock": "real",
                        "stream_size": a.stream_size, "mem_size": a.mem_size, "hp_size": a.hp_size,
                        "small_files": a.small_files, "repeat": a.repeat, "work": work},
           "experiments": {}}
    try:
        for name in [e for e in EXPERIMENTS if e in only]:
            log(f"== {name}")
            t = time.monotonic()
            try:
                if name in ("restore1", "restoreall") and "weave4" not in b.state:
                    raise Fail("weave4 failed, so there is no job to restore")
                res = globals()[name](b)
            except Fail as e:
                res = {"error": str(e)}
            res["experiment_seconds"] = round(time.monotonic() - t, 1)
            doc["experiments"][name] = res
            log(f"{name}: pass={res.get('pass')} error={res.get('error')}")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    doc["seconds"] = round(time.monotonic() - T0, 1)
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
