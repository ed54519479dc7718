#!/usr/bin/env python3
"""Checks that a tapeloom binary built without the cargo feature `test-hooks` (the
build users get: `cargo build --release`) ignores the test hooks.

Usage: scripts/hooks_ignored.py BIN

A backup through a stage into a fresh home, with the hooks set as a test would set
them: TAPELOOM_NOW in 2099, TAPELOOM_CLOCK_SPEED a million, TAPELOOM_FAULTS failing
every write and TAPELOOM_TEST_DAMAGE_CHUNK flipping a byte of the first staged
chunk. A build that read any of them would fail the backup, leave it partial, date
it 2099 or make it last for hours. Here the job must end ok, start today (UTC),
last under ten minutes, verify, and the library must not say "injected faults".
(TAPELOOM_TEST_WALK_DELAY_MS is read by network backups only, which this does not
run.) Prints one line; exits 1 when a hook was read.
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile

HOOKS = {
    "TAPELOOM_NOW": "2099-01-01T00:00:00Z",
    "TAPELOOM_CLOCK_SPEED": "1000000",
    "TAPELOOM_FAULTS": "write-error-rate=1",
    "TAPELOOM_TEST_DAMAGE_CHUNK": "1:0:200",
}


def run(bin, home, *args, env=None):
    r = subprocess.run([bin, "--home", home, "--json", *args], capture_output=True,
                       text=True, env=env, timeout=600)
    return r.returncode, r.stdout, r.stderr.strip()


def when(text):
    # Python before 3.11 reads neither "Z" nor nanoseconds.
    day, clock = text.rstrip("Z").split("T")
    return datetime.datetime.fromisoformat(f"{day}T{clock[:15]}+00:00")


def main():
    bin = os.path.abspath(sys.argv[1])
    problems = []
    with tempfile.TemporaryDirectory() as work:
        home, src, stage = (os.path.join(work, d) for d in ("home", "src", "stage"))
        os.mkdir(src)
        with open(os.path.join(src, "data"), "wb") as f:
            f.write(os.urandom(300_000))
        code, _, err = run(bin, home, "stage", "add", stage, "--size", "64M")
        if code != 0:
            sys.exit(f"hooks ignored: stage add failed: {err}")
        days = {datetime.datetime.now(datetime.timezone.utc).date()}
        code, out, err = run(bin, home, "backup", "--via", "stage", "--chunk-size", "256K",
                             "--block-size", "64K", src, env={**os.environ, **HOOKS})
        days.add(datetime.datetime.now(datetime.timezone.utc).date())
        if code != 0:
            problems.append(f"the backup exited {code}: {err[:300]}")
        else:
            job = json.loads(out)
            if job["status"] != "ok" or job["errors"]:
                problems.append(f"the backup is {job['status']}: {job['errors'][:1]}")
        code, out, err = run(bin, home, "jobs")
        jobs = json.loads(out)["jobs"] if code == 0 else []
        if len(jobs) != 1:
            problems.append(f"jobs: {len(jobs)} jobs, not one: {err}")
        else:
            started, ended = when(jobs[0]["started"]), when(jobs[0]["ended"] or jobs[0]["started"])
            if started.date() not in days:
                problems.append(f"the job started {jobs[0]['started']}, not today")
            if (ended - started).total_seconds() > 600:
                problems.append(f"the job lasted from {jobs[0]['started']} to {jobs[0]['ended']}")
            code, _, err = run(bin, home, "verify", str(jobs[0]["job_id"]))
            if code != 0:
                problems.append(f"verify exited {code}: {err[:300]}")
        code, out, err = run(bin, home, "library", "status", env={**os.environ, **HOOKS})
        library = json.loads(out)["library"] if code == 0 else err
        if code != 0 or "injected faults" in library:
            problems.append(f"library status under the hooks: {library}")
    if problems:
        print("hooks ignored: NO, this build reads test hooks: " + "; ".join(problems))
        sys.exit(1)
    print(f"hooks ignored: a backup under {', '.join(HOOKS)} started "
          f"{jobs[0]['started']}, ended ok and verified")


if __name__ == "__main__":
    main()
