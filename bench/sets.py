#!/usr/bin/env python3
"""Backup sets and levels, measured: one JSON document on stdout (progress on stderr).

  changes   A tree of --files files (default 10,000) in 100 folders, backed up full;
            then 200 files modified, 50 deleted, 30 added, 20 renamed, 5 chmod-only
            and 5 xattr-only; then an incremental. Pass: the incremental opened and
            read exactly the 250 changed or added files (bytes read from the sources,
            as the job counts them, equal their sizes), stored 10 metadata-only
            records and 70 deletions.
  week      The same tree with hard links, symlinks, sparse files and a fifo, backed
            up full, then six days of such changes each followed by an incremental,
            then a seventh followed by a differential, on a library with --drives 3
            and the LTO model (virtual clock), in a pool of at most two jobs per
            cartridge. After each day the tree is recorded object by object (type,
            mode, owner, size, mtime in ns, content hash, symlink target, xattrs,
            hard-link groups, sparseness). Each day is restored with
            `restore --set --at JOB` and compared with its record, and
            `ls --set --at JOB` must list exactly that tree; then the catalog is
            set aside and rebuilt from the tapes alone, and `ls --set --at` of every
            day must give the same listing as before. Pass: all eight equal;
            the seventh day's restore mounts each cartridge it needs once and reads
            no block twice: restored again with --skip-by locate (no reading
            through gaps), it reads no more blocks than planned (the distinct
            blocks that hold what it wants).
  unchanged An incremental of an unchanged tree of --big-files files (default 100,000,
            `gen --preset small-files`, 2.5 GB) against its full, in the same run,
            with the tree in the page cache. Pass: the incremental takes under 10%
            of the full's wall time, opens no file and stores nothing. As root, the
            same again with the page cache dropped before each (`cold`, reported).

  python3 bench/sets.py                     # everything
  python3 bench/sets.py --quick             # 2,000 / 10,000 files
  python3 bench/sets.py --only changes,week
"""
import argparse, hashlib, json, os, random, shutil, stat, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import Bench, Fail, default_work_parent, log, settle, REPO  # noqa: E402

EXPERIMENTS = ["changes", "week", "unchanged"]


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make_tree(src, files, rnd, special=False):
    per = max(files // 100, 1)
    for d in range(100):
        for i in range(per):
            write(os.path.join(src, f"d{d:03}", f"f{i:03}"), rnd.randbytes(1 + rnd.randrange(6000)))
    if special:
        os.makedirs(os.path.join(src, "special"))
        for k in range(10):
            os.link(os.path.join(src, f"d{k:03}", "f000"), os.path.join(src, "special", f"hard{k}"))
            os.symlink(f"../d{k:03}/f001", os.path.join(src, "special", f"sym{k}"))
        for k in range(2):
            p = os.path.join(src, "special", f"sparse{k}")
            with open(p, "wb") as f:
                f.truncate(64 << 20)
                f.seek(1 << 20)
                f.write(rnd.randbytes(300_000))
                f.seek(40 << 20)
                f.write(rnd.randbytes(5000))
        os.mkfifo(os.path.join(src, "special", "pipe"))
        os.setxattr(os.path.join(src, "d000", "f002"), "user.tag", b"first")


def change(src, rnd, day, files):
    """One day's changes: 200 modified, 50 deleted, 30 added, 20 renamed, 5 chmod,
    5 xattr (fewer in a smaller tree). Returns what an incremental should store."""
    names = sorted(os.path.relpath(os.path.join(d, f), src)
                   for d, _, fs in os.walk(src) for f in fs
                   if os.path.dirname(os.path.join(d, f)) != os.path.join(src, "special"))
    names = [n for n in names if stat.S_ISREG(os.lstat(os.path.join(src, n)).st_mode)
             and os.lstat(os.path.join(src, n)).st_nlink == 1]
    scale = files / 10_000
    n = lambda k: max(1, int(k * scale))  # noqa: E731
    rnd.shuffle(names)
    picks = iter(names)
    take = lambda k: [next(picks) for _ in range(n(k))]  # noqa: E731
    data, meta, gone = set(), set(), set()
    read = 0
    for p in take(200):
        write(os.path.join(src, p), rnd.randbytes(1 + rnd.randrange(6000)))
        data.add(p)
        read += os.lstat(os.path.join(src, p)).st_size
    for p in take(50):
        os.remove(os.path.join(src, p))
        gone.add(p)
    for k in range(n(30)):
        p = f"d{rnd.randrange(100):03}/day{day}-new{k}"
        write(os.path.join(src, p), rnd.randbytes(1 + rnd.randrange(6000)))
        data.add(p)
        read += os.lstat(os.path.join(src, p)).st_size
    for k, p in enumerate(take(20)):
        to = os.path.join(os.path.dirname(p), f"day{day}-moved{k}")
        os.rename(os.path.join(src, p), os.path.join(src, to))
        data.add(to)
        gone.add(p)
        read += os.lstat(os.path.join(src, to)).st_size
    for k, p in enumerate(take(10)):
        if k % 2:
            os.chmod(os.path.join(src, p), 0o600)
        else:
            os.setxattr(os.path.join(src, p), "user.day", str(day).encode())
        meta.add(p)
    return {"data": data, "meta": meta, "deleted": gone, "read_bytes": read}


def special_change(src, rnd, day):
    """Days also touch the special objects: a sparse file, a hard link, a symlink."""
    sp = os.path.join(src, "special")
    if day == 2:
        with open(os.path.join(sp, "sparse0"), "r+b") as f:
            f.seek(20 << 20)
            f.write(rnd.randbytes(4096))
    if day == 3:
        os.remove(os.path.join(src, "d001", "f000"))  # the first name of hard1
    if day == 4:
        os.remove(os.path.join(sp, "sym2"))
        os.symlink("../d005/f005", os.path.join(sp, "sym2"))
    if day == 5:
        os.link(os.path.join(sp, "hard4"), os.path.join(sp, "hard4b"))


def record(root):
    """Every object under root: path -> facts; and the hard-link groups."""
    out, groups = {}, {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            x = {}
            if not stat.S_ISLNK(st.st_mode) and not stat.S_ISFIFO(st.st_mode):
                x = {a: os.getxattr(p, a) .hex() for a in os.listxattr(p) if a.startswith("user.")}
            f = {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid, "xattrs": x}
            if stat.S_ISREG(st.st_mode):
                h = hashlib.sha256()
                with open(p, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
                f.update(size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=h.hexdigest(),
                         sparse=st.st_blocks * 512 < st.st_size // 2)
                if st.st_nlink > 1:
                    groups.setdefault(st.st_ino, []).append(rel)
            elif stat.S_ISLNK(st.st_mode):
                f["target"] = os.readlink(p)
            elif stat.S_ISDIR(st.st_mode):
                f["mtime_ns"] = st.st_mtime_ns
            else:
                f["mtime_ns"] = st.st_mtime_ns
            out[rel] = f
    links = sorted(sorted(g) for g in groups.values())
    return out, links


def differences(want, got):
    (a, la), (b, lb) = want, got
    diffs = [f"missing {p}" for p in sorted(a.keys() - b.keys())]
    diffs += [f"extra {p}" for p in sorted(b.keys() - a.keys())]
    for p in sorted(a.keys() & b.keys()):
        if a[p] != b[p]:
            keys = [k for k in a[p] if a[p].get(k) != b[p].get(k)]
            diffs.append(f"{p}: {', '.join(keys)}")
    if la != lb:
        diffs.append(f"hard-link groups differ: {la} vs {lb}")
    return diffs


def backup(b, home, src, *args):
    wall, j, _ = b.tl(home, "backup", *args, src)
    j["wall_seconds"] = round(wall, 3)
    return j


def changes(b):
    rnd = random.Random(7)
    home = b.path("home-changes")
    b.tl(home, "library", "create", "--drives", 1, "--slots", 4, "--capacity", "4G")
    src = b.path("src-changes")
    make_tree(src, b.a.files, rnd)
    full = backup(b, home, src, "--set", "c")
    want = change(src, rnd, 1, b.a.files)
    inc = backup(b, home, src, "--set", "c", "--level", "incremental")
    res = {"full": pick(full), "incremental": pick(inc),
           "expected": {"files_read": len(want["data"]), "bytes_read": want["read_bytes"],
                        "meta_only": len(want["meta"]), "deleted": len(want["deleted"])}}
    res["pass"] = (inc["level"] == "incremental" and inc["source_files_opened"] == len(want["data"])
                   and inc["source_bytes_read"] == want["read_bytes"]
                   and inc["meta_only"] == len(want["meta"]) and inc["deleted"] == len(want["deleted"]))
    return res


def pick(j):
    keys = ("job_id", "level", "base_job", "promoted", "files", "bytes", "unchanged", "meta_only",
            "deleted", "source_files_opened", "source_bytes_read", "seconds", "wall_seconds", "volumes")
    return {k: j.get(k) for k in keys}


def listing(b, home, job):
    _, ls, _ = b.tl(home, "ls", "--set", "w", "--at", job)
    entries = ls["entries"] if isinstance(ls, dict) else ls
    return sorted(e["path"] for e in entries)


def js_jobs(b, home):
    return b.tl(home, "jobs")[1]["jobs"]


def week(b):
    rnd = random.Random(11)
    home = b.path("home-week")
    b.tl(home, "library", "create", "--drives", 3, "--slots", 12, "--capacity", "1G",
         "--model", "lto3", "--clock", "virtual")
    b.tl(home, "pool", "create", "week", "--max-jobs-per-volume", 2)
    src = b.path("src-week")
    make_tree(src, b.a.files, rnd, special=True)
    days, jobs, records = [], [], []
    for day in range(8):
        if day:
            want = change(src, rnd, day, b.a.files)
            special_change(src, rnd, day)
        level = "full" if day == 0 else ("differential" if day == 7 else "incremental")
        j = backup(b, home, src, "--set", "w", "--pool", "week", "--level", level)
        jobs.append(j["job_id"])
        records.append(record(src))
        days.append({"day": day, "backup": pick(j)})
        if day == 1:
            days[-1]["expected_reads"] = len(want["data"])
        log(f"week: day {day} {level}: {j['files']} entries, {j['source_files_opened']} files read")
        time.sleep(0.01)
    ok = True
    for day, job in enumerate(jobs):
        out = b.path(f"restore-day{day}")
        wall, r, _ = b.tl(home, "restore", "--set", "w", "--at", job, "--to", out)
        diffs = differences(records[day], record(out))
        listed = listing(b, home, job)
        same_listing = listed == sorted(["."] + list(records[day][0].keys()))
        days[day]["restore"] = {k: r.get(k) for k in ("files", "bytes", "mounts", "locates", "blocks_read",
                                                      "blocks_planned", "jobs", "modeled_seconds")}
        days[day]["restore"]["wall_seconds"] = round(wall, 2)
        days[day]["differences"] = diffs[:20]
        days[day]["difference_count"] = len(diffs)
        days[day]["ls_matches"] = same_listing
        ok &= not diffs and same_listing
        shutil.rmtree(out, ignore_errors=True)
    # The seventh day again, locating over every gap instead of reading through
    # short ones: then every block read is a wanted one, so none is read twice.
    out = b.path("restore-day7-locate")
    _, r, _ = b.tl(home, "restore", "--set", "w", "--at", jobs[7], "--to", out, "--skip-by", "locate")
    located = {k: r.get(k) for k in ("mounts", "locates", "blocks_read", "blocks_planned", "jobs")}
    located["difference_count"] = len(differences(records[7], record(out)))
    shutil.rmtree(out, ignore_errors=True)
    last = days[7]["restore"]
    _, js, _ = b.tl(home, "jobs")
    needed = {j["job_id"]: j for j in js["jobs"] if j["job_id"] in (jobs[0], jobs[7])}
    cartridges = sorted({v for j in needed.values() for v in j["volumes"]})
    _, st, _ = b.tl(home, "library", "status")
    # From the tapes alone: the same listing of every day.
    starts = [j["started"] for j in js_jobs(b, home)]
    before = [b.tl(home, "ls", "--set", "w", "--at", at)[1] for at in starts]
    for f in os.listdir(home):
        if f.startswith("catalog.sqlite"):
            os.rename(os.path.join(home, f), os.path.join(home, f + ".old"))
    _, rebuilt, _ = b.tl(home, "catalog", "rebuild")
    after = [b.tl(home, "ls", "--set", "w", "--at", at)[1] for at in starts]
    same_after_rebuild = before == after and len(starts) == 8
    res = {"days": days, "day7_cartridges": cartridges, "day7_locate_only": located,
           "rebuilt_jobs": len(rebuilt.get("jobs_added", [])),
           "listings_same_after_rebuild": same_after_rebuild}
    res["day7_one_mount_each"] = last.get("mounts") == len(cartridges)
    # Every block is read at most once: no more than the plan wanted.
    res["day7_no_block_twice"] = (located["blocks_read"] <= located["blocks_planned"]
                                  and located["mounts"] == len(cartridges)
                                  and located["difference_count"] == 0)
    res["pass"] = (ok and res["day7_one_mount_each"] and res["day7_no_block_twice"]
                   and same_after_rebuild)
    return res


def unchanged(b):
    home = b.path("home-unchanged")
    b.tl(home, "library", "create", "--drives", 1, "--slots", 4, "--capacity", "400G")
    src, g = b.gen("small-files", files=b.a.big_files)
    full = backup(b, home, src, "--set", "u")
    inc = backup(b, home, src, "--set", "u", "--level", "incremental")
    ratio = inc["wall_seconds"] / full["wall_seconds"]
    res = {"files": g["files"], "page_cache": "warm", "full": pick(full), "incremental": pick(inc),
           "time_ratio": round(ratio, 4)}
    res["pass"] = ratio < 0.10 and inc["source_files_opened"] == 0 and inc["bytes"] == 0
    if os.geteuid() == 0:
        # The same with the page cache dropped before each: the tree read from disk.
        settle(True)
        cfull = backup(b, home, src, "--set", "u")
        settle(True)
        cinc = backup(b, home, src, "--set", "u", "--level", "incremental")
        res["cold"] = {"full": pick(cfull), "incremental": pick(cinc),
                       "time_ratio": round(cinc["wall_seconds"] / cfull["wall_seconds"], 4)}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--work")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--only", help="experiments: " + ",".join(EXPERIMENTS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--files", type=int, help="files in the changes and week trees (default 10000)")
    ap.add_argument("--big-files", type=int, help="files in the unchanged tree (default 100000)")
    a = ap.parse_args()
    a.files = a.files or (2000 if a.quick else 10_000)
    a.big_files = a.big_files or (10_000 if a.quick else 100_000)
    only = a.only.split(",") if a.only else EXPERIMENTS
    if set(only) - set(EXPERIMENTS):
        ap.error(f"unknown experiments: {', '.join(sorted(set(only) - set(EXPERIMENTS)))}")
    work = tempfile.mkdtemp(prefix="tapeloom-sets-", dir=a.work or default_work_parent())
    b = Bench(a, work)
    doc = {"benchmark": "sets", "settings": {"files": a.files, "big_files": a.big_files}, "experiments": {}}
    try:
        for name in [e for e in EXPERIMENTS if e in only]:
            log(f"== {name}")
            t = time.monotonic()
            try:
                res = globals()[name](b)
            except Fail as e:
                res = {"error": str(e), "pass": False}
            res["experiment_seconds"] = round(time.monotonic() - t, 1)
            doc["experiments"][name] = res
            log(f"{name}: pass={res.get('pass')} error={res.get('error')}")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    doc["pass"] = all(r.get("pass") for r in doc["experiments"].values())
    print(json.dumps(doc, indent=2))
    return 0 if doc["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
