#!/usr/bin/env python3
"""The catalog at scale, on SQLite and on PostgreSQL in one run: one JSON
document on stdout (progress on stderr).

Each backend gets --jobs jobs of --files generated file rows (default 10 of
1,000,000: 10 million rows), recorded as backups record them, by the example
`crates/catalog/examples/scale.rs` (built here with cargo). It prints, per
backend:

  insert_rows_per_s  rows recorded per second over all jobs (10,000 a batch,
                     each batch one transaction);
  ls_folder_ms       listing one folder of the last job (1,000 files);
  plan_one_file_ms   what a one-file restore's plan reads: the file's row, the
                     job's segments and extents;
  set_folder_at_ms   one folder of the set's tree at its last job, as
                     `ls --set S --at T FOLDER` reads it: the folder's rows of
                     each job of the chain;
  set_tree_at_ms     the set's whole tree at its last job (every row of the
                     chain), for context: a listing of the whole set reads it.

Targets: at least 200,000 rows per second on each, and each lookup of one folder
or file (the first three) under 50 ms.

PostgreSQL is Debian's (the package postgresql), started in a temporary folder
on 127.0.0.1 with a port of its own (as the postgres user when run as root) and
stopped by its process id afterwards. It runs with PostgreSQL's defaults
(fsync on).

  python3 bench/catalog_scale.py
  python3 bench/catalog_scale.py --jobs 2 --files 500000
"""
import argparse, glob, json, os, shutil, socket, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import default_work_parent, log, REPO  # noqa: E402

TARGET_ROWS_PER_S = 200_000
TARGET_LOOKUP_MS = 50


def pg_bin():
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    dirs = [d for d in dirs if os.path.exists(os.path.join(d, "initdb"))]
    if not dirs:
        sys.exit("catalog_scale: PostgreSQL is not installed (install the package postgresql)")
    return dirs[-1]


def as_owner(cmd):
    if os.geteuid() == 0:
        return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"] + cmd
    return cmd


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A PostgreSQL server in `folder`, on 127.0.0.1."""

    def __init__(self, folder):
        self.bin = pg_bin()
        self.dir = folder
        if os.geteuid() == 0:
            shutil.chown(folder, "postgres", "postgres")
        self.data = os.path.join(folder, "data")
        self.port = free_port()
        subprocess.run(as_owner([os.path.join(self.bin, "initdb"), "-D", self.data, "-U", "postgres",
                                 "-A", "trust", "-E", "UTF8"]), check=True, capture_output=True)
        opts = f"-p {self.port} -k {folder} -c listen_addresses=127.0.0.1"
        subprocess.run(as_owner([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l",
                                 os.path.join(folder, "log"), "-o", opts, "-w", "start"]),
                       check=True, capture_output=True)

    def database(self, name):
        subprocess.run([os.path.join(self.bin, "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                        "-U", "postgres", name], check=True, capture_output=True)
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self):
        """Stops the server by its process id (SIGTERM: a fast shutdown) and waits."""
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            pid = int(f.readline())
        os.kill(pid, 15)
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            import time
            time.sleep(0.1)


def run(exe, target, jobs, files):
    out = subprocess.run([exe, target, str(jobs), str(files)], check=True, stdout=subprocess.PIPE,
                         text=True)
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--files", type=int, default=1_000_000, help="file rows per job")
    ap.add_argument("--work", default=None, help="scratch folder (a fresh one is made inside it)")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "tapeloom-catalog", "--example", "scale"],
                   cwd=REPO, check=True)
    exe = os.path.join(REPO, "target", "release", "examples", "scale")
    results = []
    with tempfile.TemporaryDirectory(prefix="tapeloom-catalog-scale-", dir=a.work or default_work_parent()) as d:
        os.chmod(d, 0o755)  # PostgreSQL's user reaches its folder inside
        log(f"SQLite: {a.jobs} jobs of {a.files} rows")
        results.append(run(exe, os.path.join(d, "catalog.sqlite"), a.jobs, a.files))
        pg_dir = os.path.join(d, "pg")
        os.mkdir(pg_dir)
        pg = Postgres(pg_dir)
        try:
            log(f"PostgreSQL: {a.jobs} jobs of {a.files} rows")
            results.append(run(exe, pg.database("scale"), a.jobs, a.files))
        finally:
            pg.stop()
    lookups = ("ls_folder_ms", "plan_one_file_ms", "set_folder_at_ms")
    met = {r["target"]: {"insert_rows_per_s": r["insert_rows_per_s"] >= TARGET_ROWS_PER_S,
                         **{k: r[k] < TARGET_LOOKUP_MS for k in lookups}} for r in results}
    print(json.dumps({"bench": "catalog_scale", "cores": os.cpu_count(), "results": results,
                      "targets": {"insert_rows_per_s": TARGET_ROWS_PER_S, "lookup_ms": TARGET_LOOKUP_MS},
                      "met": met}, indent=2))


if __name__ == "__main__":
    main()
