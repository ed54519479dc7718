#!/usr/bin/env python3
"""Backup and restore speed of tapeloom against tar on the same trees, in one run.

Makes two trees on the file system of --work: a large-file tree (files of 1-64 MiB,
2 GiB in all by default) and a small-file tree (100,000 files of 1-16 KiB). For each,
times `tar -b 512 -cf` and `tapeloom backup` to the virtual library on the same file
system, then `tar -xf` and `tapeloom restore`, and prints one JSON document with
MB/s, files/s and the tapeloom/tar ratios (above 1 means tapeloom is faster).
The tools take turns going first and the best of --repeat runs counts, because these
machines are noisy; nothing is deleted between timed steps.
The page cache is warm for both (each tree is read once before timing).
"""
import argparse, json, os, random, shutil, subprocess, sys, time

def make_large(root, total, seed):
    rnd = random.Random(seed)
    os.makedirs(root, exist_ok=True)
    done, i = 0, 0
    while done < total:
        size = min(rnd.randint(1 << 20, 64 << 20), total - done)
        d = os.path.join(root, f"d{i % 8}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:05}.bin"), "wb") as f:
            left = size
            while left:
                n = min(left, 8 << 20)
                f.write(rnd.randbytes(n))
                left -= n
        done += size
        i += 1
    return i, done

def make_small(root, count, seed):
    rnd = random.Random(seed)
    blob = rnd.randbytes(16 << 10)
    total = 0
    for i in range(count):
        d = os.path.join(root, f"d{i // 1000:03}")
        if i % 1000 == 0:
            os.makedirs(d, exist_ok=True)
        size = rnd.randint(1 << 10, 16 << 10)
        off = rnd.randint(0, (16 << 10) - size)
        with open(os.path.join(d, f"f{i:06}"), "wb") as f:
            f.write(blob[off:off + size])
        total += size
    return count, total

def warm(root):
    subprocess.run(["tar", "-cf", "/dev/null", "-C", root, "."], check=True)

def timed(cmd, **kw):
    # Earlier steps' dirty pages must not be written back on this step's time.
    os.sync()
    time.sleep(1)
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {p.stderr.decode(errors='replace').strip()}")
    return dt, p.stdout

def fresh(path):
    shutil.rmtree(path, ignore_errors=True)

def run_tar(tree, work, tag):
    out = os.path.join(work, f"tar-{tag}.tar")
    b, _ = timed(["tar", "-b", "512", "-cf", out, "-C", tree, "."])
    dest = os.path.join(work, f"tar-out-{tag}")
    os.makedirs(dest)
    r, _ = timed(["tar", "-b", "512", "-xf", out, "-C", dest])
    return b, r

def run_tapeloom(tree, work, tag, tapeloom):
    home = os.path.join(work, f"home-{tag}")
    b, o = timed([tapeloom, "--home", home, "--json", "backup", tree])
    job = json.loads(o)["job_id"]
    dest = os.path.join(work, f"tl-out-{tag}")
    r, _ = timed([tapeloom, "--home", home, "--json", "restore", str(job), "--to", dest])
    return b, r

def bench_tree(name, tree, files, nbytes, work, tapeloom, repeat):
    # Nothing is deleted between timed steps (deleting 100,000 files keeps the file
    # system busy for a long while); every step writes to new names, and the two
    # tools take turns going first.
    runs = os.path.join(work, "runs")
    fresh(runs)
    os.makedirs(runs)
    best = {}
    def keep(k, v):
        best[k] = min(best.get(k, 1e9), v)
    for r in range(repeat):
        order = [("tar", run_tar), ("tapeloom", run_tapeloom)]
        if r % 2:
            order.reverse()
        for tool, fn in order:
            args = (tree, runs, f"{name}-{r}") + ((tapeloom,) if tool == "tapeloom" else ())
            b, rs = fn(*args)
            keep(f"{tool}_backup", b)
            keep(f"{tool}_restore", rs)
    fresh(runs)
    res = {"tree": name, "files": files, "bytes": nbytes, "repeat": repeat}
    for k, v in best.items():
        res[k + "_seconds"] = round(v, 3)
        res[k + "_mb_per_s"] = round(nbytes / 1e6 / v, 1)
        res[k + "_files_per_s"] = round(files / v, 1)
    res["backup_speedup_vs_tar"] = round(best["tar_backup"] / best["tapeloom_backup"], 3)
    res["restore_speedup_vs_tar"] = round(best["tar_restore"] / best["tapeloom_restore"], 3)
    return res

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/var/tmp/tapeloom-bench", help="scratch folder (same file system for all)")
    ap.add_argument("--tapeloom", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "tapeloom"))
    ap.add_argument("--large-total", type=int, default=2 << 30)
    ap.add_argument("--small-count", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    results = []
    large = os.path.join(a.work, "large")
    small = os.path.join(a.work, "small")
    if not os.path.exists(os.path.join(a.work, "large.done")):
        fresh(large); lf = make_large(large, a.large_total, 1)
        json.dump(lf, open(os.path.join(a.work, "large.done"), "w"))
    lf = json.load(open(os.path.join(a.work, "large.done")))
    if not os.path.exists(os.path.join(a.work, "small.done")):
        fresh(small); sf = make_small(small, a.small_count, 2)
        json.dump(sf, open(os.path.join(a.work, "small.done"), "w"))
    sf = json.load(open(os.path.join(a.work, "small.done")))
    for name, tree, (files, nbytes) in (("large-files", large, lf), ("small-files", small, sf)):
        warm(tree)
        results.append(bench_tree(name, tree, files, nbytes, a.work, a.tapeloom, a.repeat))
    print(json.dumps({"benchmark": "backup_vs_tar", "page_cache": "warm", "results": results}, indent=2))

if __name__ == "__main__":
    main()
