#!/usr/bin/env python3
"""Hierarchical storage as a user sees it, as one JSON document on stdout
(progress on stderr). Needs root (the daemon watches with fanotify).

  round-trip  --files regular files of a real tree (copied from /usr/share, with
              their folders, names and times) are managed, migrated and released
              (each becomes a stub with no block on disk). With `hsm daemon`
              running, `ls -lR`, `find -newer`, `du -s` and `stat` of every file
              must raise no event (the daemon's counters); then `sha256sum` of
              every file (8 at once, through xargs) reads them through the
              daemon and must give the digests taken before the migration. The tree is released again and copied
              with coreutils' `cp -a` to another folder, which must be identical.

  ordered     --files files of a real tree, with random filler files among them
              (one after every --fill-every files, in the same folder) so that
              they lie spread over 3 cartridges of --capacity, on a library of 2
              drives with the LTO-9 model at the scale that gives that capacity
              (full geometry: 280 wraps of 1,035 m) and the virtual clock. All
              migrated as one job in 64 KiB blocks, and released. --picks of
              them, chosen at random (--seed), are read at once through the
              daemon, one `cat` per file, all started together; then released
              again and recalled with `hsm recall --order block` (one reading,
              block order) and `--order asked` (one file after another in the
              order chosen). Each run starts with the drives empty. Printed: the
              modeled time of each, the plan's predicted time, the loads, and the
              ratios planned/block and planned/asked.

  no-hang     a read the daemon cannot serve: the library's folder moved away
              (EIO at once), a recall held past `--timeout 5s` by another command
              holding the home (EIO at the timeout), and the daemon killed while
              a reader waits (the guardian answers EIO).

  backups     --stub-files files, --stubs of them released and the rest
              premigrated: `backup` of the tree (its `source_bytes_read`, and
              the daemon's events meanwhile), its restore into the tree (the
              released files come back as stubs) and `hsm recall` of it, which
              must give every file's first digest.

  watermarks  a 400 MB ext4 file system on a loop device filled past 93% by
              migrated files of 4 MiB, each read one second after the one
              before; the two least recently read are one open for writing and
              one changed after its copy. `hsm release --high 90% --low 70%`
              must bring it under 70%, least recently read first, and release
              neither of those two.

  python3 bench/hsm.py
  python3 bench/hsm.py --files 2000
  python3 bench/hsm.py --case ordered
"""
import argparse, hashlib, json, os, random, shutil, signal, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import default_work_parent, log, REPO  # noqa: E402


def tl(a, home, *args):
    r = subprocess.run([a.bin, "--home", home, "--json", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tapeloom {' '.join(args)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def real_tree(dst, want, source="/usr/share"):
    """Copies the first `want` regular files under `source` (in sorted walk order,
    at most 4 MiB each) to `dst`, with their folders and times."""
    n = 0
    for d, dirs, files in os.walk(source):
        dirs.sort()
        for f in sorted(files):
            src = os.path.join(d, f)
            if os.path.islink(src) or not os.path.isfile(src) or os.path.getsize(src) > 4 << 20:
                continue
            out = os.path.join(dst, os.path.relpath(src, source))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            shutil.copy2(src, out)
            n += 1
            if n == want:
                return n
    return n


def digests(root, readers=8):
    """sha256sum of every file under `root`, by path relative to it: `readers`
    sha256sum processes at once, each given 50 files."""
    files = sorted(os.path.relpath(os.path.join(d, f), root)
                   for d, _, fs in os.walk(root) for f in fs)
    r = subprocess.run(["xargs", "-0", "-P", str(readers), "-n", "50", "sha256sum", "--"],
                       input="\0".join(files), cwd=root, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"sha256sum: {r.stderr.strip()[:300]}")
    out = {}
    for line in r.stdout.splitlines():
        h, p = line.split("  ", 1)
        out[p] = h
    return out


def counters(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def wait_for(what, secs, ok):
    until = time.monotonic() + secs
    while not ok():
        if time.monotonic() > until:
            raise RuntimeError(f"{what} did not happen within {secs} s")
        time.sleep(0.1)


def round_trip(a, work):
    tree = os.path.join(work, "managed")
    home = os.path.join(work, "home")
    n = real_tree(tree, a.files)
    log(f"round-trip: {n} files copied from /usr/share")
    before = digests(tree)
    subprocess.run([a.bin, "--home", home, "library", "create", "--drives", "1", "--slots", "8",
                    "--capacity", "16G"], check=True, capture_output=True)
    tl(a, home, "hsm", "manage", tree)
    t0 = time.monotonic()
    mig = tl(a, home, "hsm", "migrate")
    t_mig = time.monotonic() - t0
    t0 = time.monotonic()
    rel = tl(a, home, "hsm", "release")
    t_rel = time.monotonic() - t0
    status = tl(a, home, "hsm", "status")["roots"][0]
    log(f"round-trip: migrated {mig['files']} in {t_mig:.1f} s, released {rel['files']} "
        f"in {t_rel:.1f} s")
    stat_path = os.path.join(work, "daemon.json")
    daemon = subprocess.Popen([a.bin, "--home", home, "hsm", "daemon", "--status", stat_path],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("the daemon marking the stubs", 120,
                 lambda: counters(stat_path).get("marked", -1) >= rel["files"])
        looks = {}
        for name, cmd in [("ls -lR", ["ls", "-lR"]), ("find -newer", ["find", ".", "-newer", "."]),
                          ("du -s", ["du", "-s", "."])]:
            subprocess.run(cmd, cwd=tree, stdout=subprocess.DEVNULL, check=True)
            looks[name] = counters(stat_path).get("events")
        files = [os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs]
        for i in range(0, len(files), 500):
            subprocess.run(["stat", "--", *files[i:i + 500]], stdout=subprocess.DEVNULL, check=True)
        looks["stat"] = counters(stat_path).get("events")
        t0 = time.monotonic()
        after = digests(tree)
        t_read = time.monotonic() - t0
        c_read = counters(stat_path)
        same = sum(1 for p, h in before.items() if after.get(p) == h)
        log(f"round-trip: sha256sum of {len(after)} files through the daemon in {t_read:.1f} s, "
            f"{same} identical")
        # Released again, then copied by coreutils through the daemon.
        rel2 = tl(a, home, "hsm", "release")
        copy = os.path.join(work, "copy")
        t0 = time.monotonic()
        cp = subprocess.run(["cp", "-a", tree, copy], capture_output=True, text=True)
        t_cp = time.monotonic() - t0
        diff = subprocess.run(["diff", "-r", "-q", tree, copy], capture_output=True, text=True)
        c_end = counters(stat_path)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    return {
        "files": n,
        "bytes": sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tree) for f in fs),
        "migrated": mig["files"], "migrate_seconds": round(t_mig, 2), "migrate_jobs": mig["jobs"],
        "released": rel["files"], "release_seconds": round(t_rel, 2),
        "after_release": {"files": status["files"], "disk_bytes": status["disk_bytes"]},
        "events_after_looking": looks,
        "read_through_daemon": {"files": len(after), "identical": same,
                                "seconds": round(t_read, 2), "counters": c_read},
        "released_again": rel2["files"],
        "cp_a": {"exit": cp.returncode, "seconds": round(t_cp, 2),
                 "identical": diff.returncode == 0 and cp.returncode == 0,
                 "differences": diff.stdout.splitlines()[:5]},
        "counters_at_end": c_end,
    }


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def with_filler(tree, every, total):
    """Puts one file of random bytes after every `every` files of `tree` (in the
    same folder, named to sort just after it), `total` bytes in all. Returns
    their paths."""
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs)
    at = files[every - 1::every]
    each = max(1, total // max(1, len(at)))
    out = []
    for p in at:
        q = p + "~fill"
        with open(q, "wb") as f:
            left = each
            while left > 0:
                n = min(left, 8 << 20)
                f.write(os.urandom(n))
                left -= n
        out.append(q)
    return out


def unload(a, home):
    subprocess.run([a.bin, "--home", home, "library", "unload"], check=True, capture_output=True)


def ordered(a, work):
    tree = os.path.join(work, "ordered")
    home = os.path.join(work, "ordered-home")
    n = real_tree(tree, a.files)
    real = sorted(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs)
    real_bytes = sum(os.path.getsize(p) for p in real)
    cap = a.capacity
    fill = with_filler(tree, a.fill_every, int(cap * 2.8) - real_bytes)
    log(f"ordered: {n} files ({real_bytes} bytes), {len(fill)} filler files")
    picks = random.Random(a.seed).sample(real, min(a.picks, len(real)))
    before = {p: sha(p) for p in picks}
    scale = cap / 18e12
    subprocess.run([a.bin, "--home", home, "library", "create", "--drives", "2", "--slots", "4",
                    "--capacity", str(cap), "--model", "lto9", "--clock", "virtual",
                    "--scale", repr(scale)], check=True, capture_output=True)
    tl(a, home, "hsm", "manage", tree)
    t0 = time.monotonic()
    mig = tl(a, home, "hsm", "migrate", "--block-size", "64K")
    t_mig = time.monotonic() - t0
    rel = tl(a, home, "hsm", "release")
    vols = [v for v in tl(a, home, "library", "status").get("slots", []) if v.get("barcode")]
    log(f"ordered: migrated {mig['files']} in {t_mig:.1f} s (jobs {mig['jobs']}), released {rel['files']}")
    unload(a, home)
    stat_path = os.path.join(work, "ordered-daemon.json")
    daemon = subprocess.Popen([a.bin, "--home", home, "hsm", "daemon", "--status", stat_path],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("the daemon marking the stubs", 300,
                 lambda: counters(stat_path).get("marked", -1) >= rel["files"])
        t0 = time.monotonic()
        storm = subprocess.run(["bash", "-c", 'for f in "$@"; do cat -- "$f" > /dev/null & done; wait',
                                "storm", *picks], capture_output=True, text=True)
        t_storm = time.monotonic() - t0
        # The daemon writes its counters once a batch is done, which is after
        # its readers were let go: wait for them to count every file.
        wait_for("the daemon's counters", 120,
                 lambda: counters(stat_path).get("recalled_files", 0) >= len(picks))
        c = counters(stat_path)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    same = sum(1 for p in picks if sha(p) == before[p])
    log(f"ordered: {len(picks)} cats through the daemon in {t_storm:.1f} s, {same} identical; "
        f"modeled {c.get('modeled_seconds')} s, planned {c.get('planned_seconds')} s")
    runs = {}
    for order in ("block", "asked"):
        tl(a, home, "hsm", "release", *picks)
        unload(a, home)
        t0 = time.monotonic()
        r = tl(a, home, "hsm", "recall", "--order", order, *picks)
        same_o = sum(1 for p in picks if sha(p) == before[p])
        runs[order] = {"modeled_seconds": r["modeled_seconds"], "loads": r["loads"],
                       "files": r["files"], "identical": same_o,
                       "wall_seconds": round(time.monotonic() - t0, 1)}
        log(f"ordered: --order {order}: modeled {r['modeled_seconds']} s, {r['loads']} loads")
    planned = c.get("modeled_seconds") or 0.0
    ratio = lambda other: round(planned / other, 4) if other else None
    return {
        "files": n, "bytes": real_bytes, "filler_files": len(fill),
        "capacity": cap, "scale": scale, "model": "lto9", "drives": 2,
        "cartridges_used": len(mig.get("volumes", [])) or None,
        "migrate_seconds": round(t_mig, 1), "jobs": mig["jobs"],
        "picks": len(picks), "seed": a.seed,
        "planned": {"modeled_seconds": planned, "predicted_seconds": c.get("planned_seconds"),
                    "loads": c.get("loads"), "batches": c.get("batches"),
                    "recalled_files": c.get("recalled_files"), "identical": same,
                    "wall_seconds": round(t_storm, 1), "cat_exit": storm.returncode},
        "block": runs["block"], "asked": runs["asked"],
        "planned_over_block": ratio(runs["block"]["modeled_seconds"]),
        "planned_over_asked": ratio(runs["asked"]["modeled_seconds"]),
    }


def timed_read(path, timeout=120):
    """`cat` of `path`: its exit code and seconds."""
    t0 = time.monotonic()
    r = subprocess.run(["cat", "--", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    return r.returncode, round(time.monotonic() - t0, 3), r.stderr.strip()[-80:]


def start_daemon(a, home, stat_path, *flags):
    try:
        os.remove(stat_path)
    except OSError:
        pass
    d = subprocess.Popen([a.bin, "--home", home, "hsm", "daemon", "--status", stat_path, *flags],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for("the daemon marking the stubs", 120, lambda: counters(stat_path).get("marked", 0) > 0)
    return d


def no_hang(a, work):
    """A read the daemon cannot serve: EIO, never a hang."""
    tree, home = os.path.join(work, "nohang"), os.path.join(work, "nohang-home")
    real_tree(tree, 50)
    subprocess.run([a.bin, "--home", home, "library", "create", "--drives", "1", "--slots", "4",
                    "--capacity", "4G"], check=True, capture_output=True)
    tl(a, home, "hsm", "manage", tree)
    tl(a, home, "hsm", "migrate")
    tl(a, home, "hsm", "release")
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs)
    stat_path = os.path.join(work, "nohang-daemon.json")
    out = {}
    # The library unreachable: its folder moved away.
    lib, away = os.path.join(home, "library"), os.path.join(home, "library-away")
    os.rename(lib, away)
    d = start_daemon(a, home, stat_path, "--window", "1s", "--timeout", "10s")
    try:
        rc, secs, err = timed_read(files[0])
        out["library_unreachable"] = {"exit": rc, "seconds": secs, "stderr": err, "timeout_s": 10,
                                      "counters": counters(stat_path)}
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=60)
    shutil.rmtree(lib, ignore_errors=True)
    os.rename(away, lib)
    # A recall that takes longer than the timeout: another command holds the home.
    d = start_daemon(a, home, stat_path, "--window", "1s", "--timeout", "5s")
    busy = subprocess.Popen(["flock", os.path.join(home, "lock"), "sleep", "30"])
    time.sleep(0.3)
    try:
        rc, secs, err = timed_read(files[1])
        out["recall_too_slow"] = {"exit": rc, "seconds": secs, "stderr": err, "timeout_s": 5,
                                  "counters": counters(stat_path)}
        # The daemon killed while a reader waits (the home still held).
        d2 = d
        reader = subprocess.Popen(["cat", "--", files[2]], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        wait_for("the reader waiting", 30, lambda: counters(stat_path).get("waiting", 0) >= 1)
        d2.send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        try:
            rc = reader.wait(timeout=60)
            hung = False
        except subprocess.TimeoutExpired:
            reader.kill()
            rc, hung = None, True
        out["daemon_killed"] = {"exit": rc, "seconds_after_kill": round(time.monotonic() - t0, 3),
                                "hung": hung}
    finally:
        if d.poll() is None:
            d.send_signal(signal.SIGTERM)
        d.wait(timeout=60)
        busy.kill()
        busy.wait()
        subprocess.run(["pkill", "-KILL", "-f", f"{home} hsm guardian"], capture_output=True)
    back = tl(a, home, "hsm", "reconcile")
    rec = tl(a, home, "hsm", "recall", tree)
    out["afterwards"] = {"recalled": rec["files"], "reconciled": {k: len(back[k]) for k in ("recorded", "times", "punched")}}
    return out


def backups(a, work):
    """A backup of a managed tree of --stubs released files and some premigrated."""
    tree, home = os.path.join(work, "stubs"), os.path.join(work, "stubs-home")
    n = real_tree(tree, a.stub_files)
    before = digests(tree)
    subprocess.run([a.bin, "--home", home, "library", "create", "--drives", "1", "--slots", "8",
                    "--capacity", "16G"], check=True, capture_output=True)
    tl(a, home, "hsm", "manage", tree)
    tl(a, home, "hsm", "migrate")
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs)
    released = files[:a.stubs]
    for i in range(0, len(released), 500):
        tl(a, home, "hsm", "release", *released[i:i + 500])
    st = tl(a, home, "hsm", "status")["roots"][0]
    premig_bytes = st["bytes"]["premigrated"]
    stat_path = os.path.join(work, "stubs-daemon.json")
    d = start_daemon(a, home, stat_path)
    try:
        b = tl(a, home, "backup", tree, "--name", "stubs")
        c = counters(stat_path)
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait(timeout=60)
    restored = os.path.join(tree, "restored")
    r = tl(a, home, "restore", str(b["job_id"]), "--to", restored)
    stubs = sum(1 for p in released
                if os.stat(os.path.join(restored, os.path.relpath(p, tree))).st_blocks == 0)
    rec = tl(a, home, "hsm", "recall", restored)
    same = sum(1 for rel, h in before.items()
               if sha(os.path.join(restored, rel)) == h)
    return {"files": n, "released": len(released), "premigrated_bytes": premig_bytes,
            "backup": {"status": b["status"], "source_bytes_read": b["source_bytes_read"],
                       "files": b["files"]},
            "daemon_events_during_backup": c.get("events"),
            "restore": {"files": r["files"], "released_restored_as_stubs": stubs},
            "recalled": rec["files"], "identical_after_recall": same}


def fill(path):
    v = os.statvfs(path)
    return 1.0 - v.f_bavail / max(1, v.f_blocks - (v.f_bfree - v.f_bavail))


def watermarks(a, work):
    """A loop-mounted ext4 file system filled past the high mark by migrated files."""
    img, mnt = os.path.join(work, "wm.img"), os.path.join(work, "wm")
    home = os.path.join(work, "wm-home")
    subprocess.run(["truncate", "-s", "400M", img], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", img], check=True)
    os.makedirs(mnt)
    subprocess.run(["mount", "-o", "loop", img, mnt], check=True)
    try:
        tree = os.path.join(mnt, "managed")
        os.makedirs(tree)
        files = []
        while fill(mnt) < 0.93:
            p = os.path.join(tree, f"f{len(files):04}")
            with open(p, "wb") as f:
                f.write(os.urandom(4 << 20))
            files.append(p)
        # File i was read i seconds after file 0: file 0 the least recently.
        base = time.time() - 3600
        for i, p in enumerate(files):
            os.utime(p, (base + i, os.stat(p).st_mtime))
        subprocess.run([a.bin, "--home", home, "library", "create", "--drives", "1", "--slots",
                        "4", "--capacity", "4G"], check=True, capture_output=True)
        tl(a, home, "hsm", "manage", tree)
        tl(a, home, "hsm", "migrate")
        # The two least recently read: one open for writing, one changed since.
        held = open(files[0], "r+b")
        with open(files[1], "r+b") as f:
            f.write(b"changed")
        before = fill(mnt)
        r = subprocess.run([a.bin, "--home", home, "--json", "hsm", "release", "--high", "90%",
                            "--low", "70%"], capture_output=True, text=True)
        rel = json.loads(r.stdout)
        after = fill(mnt)
        held.close()
        done = set(rel.get("released", []) or [])
        if not done:
            done = {p for p in files if os.stat(p).st_blocks == 0}
        order = [p for p in files[2:]]
        k = sum(1 for p in order if p in done)
        in_order = all(p in done for p in order[:k])
        return {"file_system_bytes": os.statvfs(mnt).f_blocks * os.statvfs(mnt).f_frsize,
                "files": len(files), "fill_before": round(before, 4), "fill_after": round(after, 4),
                "released": len(done), "exit": r.returncode,
                "open_for_writing_released": files[0] in done,
                "changed_after_copy_released": files[1] in done,
                "released_least_recently_read_first": in_order,
                "kept": rel.get("kept", [])[:4]}
    finally:
        subprocess.run(["umount", mnt], capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--work", default=None)
    ap.add_argument("--case", default="all",
                    choices=["all", "round-trip", "ordered", "no-hang", "backups", "watermarks"])
    ap.add_argument("--stub-files", type=int, default=10000)
    ap.add_argument("--stubs", type=int, default=9000)
    ap.add_argument("--picks", type=int, default=1000)
    ap.add_argument("--capacity", type=int, default=1 << 30, help="bytes per cartridge (ordered)")
    ap.add_argument("--fill-every", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/hsm.py needs root: the hsm daemon watches with fanotify")
    work = a.work or os.path.join(default_work_parent(), "tapeloom-hsm")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    out = {"bench": "hsm"}
    if a.case in ("all", "round-trip"):
        out["round_trip"] = round_trip(a, work)
    if a.case in ("all", "ordered"):
        out["ordered"] = ordered(a, work)
    if a.case in ("all", "no-hang"):
        out["no_hang"] = no_hang(a, work)
    if a.case in ("all", "backups"):
        out["backups"] = backups(a, work)
    if a.case in ("all", "watermarks"):
        out["watermarks"] = watermarks(a, work)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
