#!/usr/bin/env python3
"""Migration across generations (docs/COPIES.md), as one JSON document.

A home under --work with a virtual library of 2 drives, an LTO-5 model on drive
0 and an LTO-9 model on drive 1 (`library create --model lto5,lto9`, the clock
virtual unless --real), 12 slots of --capacity, and pools `lto5` and `lto9`.
A backup set `s` is written to `lto5` on drive 0: a full of --size of random
files, then --incrementals incrementals, each after some files changed, were
added and were deleted. The tree after each job is kept to compare.

  partial  The full and the first incremental are migrated to `lto9`, read on
           the LTO-5 drive and written on the LTO-9 one; then the set's restore
           at each of its jobs (across migrated and unmigrated jobs) and each
           migrated job's own restore are identical.
  rest     `migrate --pool lto5 --to-pool lto9` moves the others; the LTO-5
           cartridges hold no job and are expired (retired from the set), and the
           set's restore at each of its jobs is identical again.

  python3 bench/migrate.py
  python3 bench/migrate.py --size 256M --real
"""
import argparse, json, os, random, shutil, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Fail, log, parse_size, same_tree, tapeloom_json, tapeloom_ok, REPO  # noqa: E402


def tl(a, home, args):
    """One command with --json: (exit code, JSON or None, stderr)."""
    return tapeloom_json(a.bin, home, args)


def ok(a, home, args):
    return tapeloom_ok(a.bin, home, args)


def write_random(path, size, rnd):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(rnd.randbytes(size))


def change(src, rnd, step):
    """Changes the tree as a day does: some files rewritten, some added, one deleted."""
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(src) for f in fs)
    for f in rnd.sample(files, max(1, len(files) // 10)):
        write_random(f, rnd.randint(1 << 10, 1 << 20), rnd)
    for i in range(3):
        write_random(os.path.join(src, f"day{step}", f"new{i}"), rnd.randint(1 << 10, 2 << 20), rnd)
    gone = rnd.choice(files)
    if os.path.exists(gone):
        os.remove(gone)


def setup(a):
    home = os.path.join(a.work, "home")
    lib = ["library", "create", "--drives", 2, "--slots", 12, "--capacity", a.capacity,
           "--model", "lto5,lto9"]
    if a.real:
        lib += ["--clock", "real", "--scale", a.scale]
    ok(a, home, lib)
    for pool in ("lto5", "lto9"):
        ok(a, home, ["pool", "create", pool])
    src = os.path.join(a.work, "src")
    rnd = random.Random(3)
    left, n = a.size, 0
    while left > 0:
        part = min(left, rnd.randint(1 << 10, 8 << 20))
        write_random(os.path.join(src, f"d{n % 4}", f"f{n:04}"), part, rnd)
        left -= part
        n += 1
    jobs, trees = [], []
    for step in range(a.incrementals + 1):
        if step:
            change(src, rnd, step)
        level = ["--level", "incremental"] if step else []
        b = ok(a, home, ["backup", src, "--pool", "lto5", "--set", "s", "--drive", 0, *level])
        jobs.append(str(b["job_id"]))
        snap = os.path.join(a.work, f"tree{step}")
        shutil.copytree(src, snap, symlinks=True)
        trees.append(snap)
    return home, jobs, trees


def set_restores(a, home, jobs, trees, tag):
    """Whether the set's restore at each of its jobs is the tree after that job."""
    good = []
    for job, tree in zip(jobs, trees):
        out = os.path.join(a.work, f"out-{tag}-{job}")
        shutil.rmtree(out, ignore_errors=True)
        code, r, _ = tl(a, home, ["restore", "--set", "s", "--at", job, "--to", out])
        good.append(code == 0 and same_tree(tree, out))
        shutil.rmtree(out, ignore_errors=True)
    return good


def drive_figures(m):
    c = m["copy"]
    pick = lambda d: None if d is None else {k: d.get(k) for k in ("bytes", "mb_per_s", "top_mb_per_s", "backhitches")}
    return {"job": m["job_id"], "from": m["from"], "to": m["to"], "blocks": c["blocks"],
            "drives": c["drives"], "read_drive": pick(c.get("read_drive")),
            "write_drive": pick(c.get("write_drive")), "verified_blocks": m["verified_blocks"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work", default="/var/tmp/tapeloom-migrate-bench")
    ap.add_argument("--size", type=parse_size, default=parse_size("96M"))
    ap.add_argument("--incrementals", type=int, default=3)
    ap.add_argument("--capacity", default="512M")
    ap.add_argument("--real", action="store_true", help="the real clock, at --scale")
    ap.add_argument("--scale", default="0.25")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    out = {"benchmark": "migrate",
           "settings": {"size": a.size, "incrementals": a.incrementals, "capacity": a.capacity,
                        "models": "lto5,lto9", "clock": "real" if a.real else "virtual"}}
    t0 = time.monotonic()
    try:
        home, jobs, trees = setup(a)
        before = {str(j["job_id"]): j for j in ok(a, home, ["jobs"])["jobs"]}
        old_tapes = sorted({v for j in jobs for v in before[j]["volumes"]})
        m = ok(a, home, ["migrate", jobs[0], jobs[1], "--to-pool", "lto9",
                         "--read-drive", 0, "--write-drive", 1])
        moved = [drive_figures(x) for x in m["moved"]]
        after = {str(j["job_id"]): j for j in ok(a, home, ["jobs"])["jobs"]}
        own = []
        for job, tree in ((jobs[0], trees[0]),):
            out_dir = os.path.join(a.work, f"out-own-{job}")
            r = ok(a, home, ["restore", job, "--to", out_dir])
            own.append(same_tree(tree, out_dir))
            shutil.rmtree(out_dir, ignore_errors=True)
        partial = {"migrated": moved, "kept": [after[j]["job_id"] for j in jobs[2:]],
                   "ids_kept": all(j in after for j in jobs),
                   "sets_kept": all(after[j]["set"] == "s" for j in jobs),
                   "levels_kept": [after[j].get("level") for j in jobs] == [before[j].get("level") for j in jobs],
                   "full_restore_identical": all(own),
                   "set_restores_identical": set_restores(a, home, jobs, trees, "partial")}
        partial["pass"] = bool(partial["ids_kept"] and partial["sets_kept"] and partial["levels_kept"]
                               and all(own) and all(partial["set_restores_identical"])
                               and all(after[j].get("moved_to") for j in jobs[:2]))
        out["partial"] = partial
        log(f"partial: pass={partial['pass']}")
        m2 = ok(a, home, ["migrate", "--pool", "lto5", "--to-pool", "lto9",
                          "--read-drive", 0, "--write-drive", 1])
        pools = {p["name"]: p for p in ok(a, home, ["pool", "list"])["pools"]}
        status = ok(a, home, ["jobs"])["jobs"]
        on_old = [j["job_id"] for j in status if set(j["volumes"]) & set(old_tapes)]
        emptied = sorted({b for x in m["moved"] + m2["moved"] for b in x["emptied"]})
        rest = {"migrated": [drive_figures(x) for x in m2["moved"]], "old_cartridges": old_tapes,
                "emptied_and_expired": emptied, "jobs_left_on_old": on_old,
                "lto5_pool_jobs": pools["lto5"]["jobs"],
                "set_restores_identical": set_restores(a, home, jobs, trees, "rest")}
        rest["pass"] = bool(emptied == old_tapes and not on_old and pools["lto5"]["jobs"] == 0
                            and all(rest["set_restores_identical"]))
        out["rest"] = rest
        log(f"rest: pass={rest['pass']}")
    except Fail as e:
        out["error"] = str(e)
    out["pass"] = bool(out.get("partial", {}).get("pass") and out.get("rest", {}).get("pass"))
    out["seconds"] = round(time.monotonic() - t0, 1)
    shutil.rmtree(a.work, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
