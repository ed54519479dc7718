#!/usr/bin/env bash
# Installs what the tests need, then runs every check: format, lints, all tests.
# Safe to run again: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_debian=()
command -v setpriv >/dev/null || need_debian+=(util-linux)
if [ ${#need_debian[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update
    $SUDO apt-get install -y "${need_debian[@]}"
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --release -- -D warnings
echo "== cargo test"
cargo test --workspace --release
