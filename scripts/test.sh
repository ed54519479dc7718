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
if [ ${#need_debian[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update
    $SUDO apt-get install -y "${need_debian[@]}"
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
# The tests run a binary built with the cargo feature test-hooks, which reads the
# test hooks (TAPELOOM_FAULTS, TAPELOOM_NOW, ...); the build users get has it off,
# and both must be lint-clean.
echo "== cargo clippy"
cargo clippy --workspace --all-targets --release -- -D warnings
echo "== cargo clippy (test hooks)"
cargo clippy --workspace --all-targets --release --features tapeloom/test-hooks -- -D warnings
echo "== cargo test (test hooks)"
# A test whose outside part (a program above, root, a mount namespace) is
# missing fails here; under a plain `cargo test` it says so and passes.
export TAPELOOM_TEST_REQUIRE_ALL=1
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
rm -f "$log"
[ "$status" -eq 0 ] || exit "$status"
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
# The build users get (`cargo build --release`, as scripts/quickstart.sh builds it)
# has no test hooks: with them set, a backup starts today, ends ok and verifies
# (scripts/hooks_ignored.py). Only the crates whose features differ are compiled
# again; target/release/tapeloom is this build afterwards.
echo "== a build without test hooks ignores them"
cargo build --release -p tapeloom
python3 scripts/hooks_ignored.py target/release/tapeloom
