#!/usr/bin/env python3
"""Small-file backup speed of tapeloom against `tar -b 512 -cf`, warm and cold.

A tapeloom backup ends with its data on stable storage (the cartridge is flushed
and the catalog committed), so tar is timed doing the same: `tar -b 512 -cf FILE`
followed by `sync --data FILE` (`--no-tar-sync` times tar alone, as earlier runs
did).

Makes (once) a tree of 100,000 files of 1-16 KiB under --work, then times
`tapeloom backup` to the virtual library of a home folder under --work and
`tar -b 512 -cf` to a file under --work (the same file system), in pairs that take
turns going first. Before each pair the previous pair's outputs are deleted and the
file system is synced; nothing is deleted between the two timed steps of a pair.

  warm  the tree is read once (data and metadata) before the pairs; every timed
        step starts with a sync.
  cold  `echo 3 > /proc/sys/vm/drop_caches` (after a sync) before every timed step;
        needs root.

Prints one JSON document: per mode the seconds of every run, files per second of
both tools (from the median run), and tapeloom/tar ratios of files per second
(above 1 means tapeloom is faster): of the medians, of the best runs, and the median
of the per-pair ratios.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from backup_vs_tar import make_small  # noqa: E402


def read_tree(root):
    """Reads every file of the tree, so its data and metadata are in the page cache."""
    tar = subprocess.Popen(["tar", "-cf", "-", "-C", root, "."], stdout=subprocess.PIPE)
    while tar.stdout.read(1 << 20):
        pass
    if tar.wait() != 0:
        sys.exit("reading the tree failed")


def settle(cold):
    # Earlier steps' dirty pages must not be written back on this step's time.
    os.sync()
    if cold:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    time.sleep(1)


def timed(*cmds):
    """Seconds to run `cmds` one after the other."""
    t = time.perf_counter()
    for cmd in cmds:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed: {p.stderr.decode(errors='replace').strip()}")
    return time.perf_counter() - t


def run_tar(tree, out, sync):
    tar = ["tar", "-b", "512", "-cf", out + ".tar", "-C", tree, "."]
    if not sync:
        return timed(tar)
    return timed(tar, ["sync", "--data", out + ".tar"])


def run_tapeloom(tree, out, tapeloom):
    return timed([tapeloom, "--home", out + ".home", "--json", "backup", tree])


def clear(runs):
    shutil.rmtree(runs, ignore_errors=True)
    os.makedirs(runs)
    os.sync()


def bench_mode(mode, tree, files, runs, tapeloom, repeat, sync=True):
    cold = mode == "cold"
    if not cold:
        read_tree(tree)
    secs = {"tar": [], "tapeloom": []}
    pairs = []
    for r in range(repeat):
        clear(runs)
        order = ["tar", "tapeloom"] if r % 2 == 0 else ["tapeloom", "tar"]
        got = {}
        for tool in order:
            out = os.path.join(runs, f"{tool}-{r}")
            settle(cold)
            if tool == "tar":
                got[tool] = run_tar(tree, out, sync)
            else:
                got[tool] = run_tapeloom(tree, out, tapeloom)
            secs[tool].append(round(got[tool], 3))
        pairs.append(got["tar"] / got["tapeloom"])
    clear(runs)
    med = {t: statistics.median(v) for t, v in secs.items()}
    best = {t: min(v) for t, v in secs.items()}
    return {
        "page_cache": mode,
        "seconds": secs,
        "tar_files_per_s": round(files / med["tar"], 1),
        "tapeloom_files_per_s": round(files / med["tapeloom"], 1),
        "ratio_of_medians": round(med["tar"] / med["tapeloom"], 3),
        "ratio_of_best": round(best["tar"] / best["tapeloom"], 3),
        "median_pair_ratio": round(statistics.median(pairs), 3),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/var/tmp/tapeloom-small", help="scratch folder (one file system)")
    ap.add_argument("--tapeloom", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "tapeloom"))
    ap.add_argument("--count", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--modes", default="warm,cold", help="warm, cold or both (comma separated)")
    ap.add_argument("--no-tar-sync", dest="tar_sync", action="store_false",
                    help="time tar without the sync of its archive")
    a = ap.parse_args()
    tapeloom = os.path.abspath(a.tapeloom)
    os.makedirs(a.work, exist_ok=True)
    tree = os.path.join(a.work, "small")
    done = os.path.join(a.work, f"small-{a.count}.done")
    if not os.path.exists(done):
        shutil.rmtree(tree, ignore_errors=True)
        json.dump(make_small(tree, a.count, 2), open(done, "w"))
    files, nbytes = json.load(open(done))
    runs = os.path.join(a.work, "runs")
    results = [bench_mode(m, tree, files, runs, tapeloom, a.repeat, a.tar_sync)
               for m in a.modes.split(",")]
    tar = "tar -b 512 -cf FILE" + ("; sync --data FILE" if a.tar_sync else "")
    print(json.dumps({"benchmark": "small_vs_tar", "files": files, "bytes": nbytes,
                      "tar": tar, "results": results}, indent=2))


if __name__ == "__main__":
    main()
