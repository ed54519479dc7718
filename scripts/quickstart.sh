#!/usr/bin/env bash
# Builds tapeloom, backs up a folder to the embedded virtual library in the default
# home, restores it to a fresh folder, verifies the tape and compares the trees.
# Usage: scripts/quickstart.sh [FOLDER]   (default: this repository's crates/ folder)
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(realpath "${1:-crates}")
cargo build --release
tl=./target/release/tapeloom
job=$($tl --json backup "$src" --name quickstart | python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])')
echo "backed up $src as job $job"
$tl jobs
out=$(mktemp -d "${TMPDIR:-/tmp}/tapeloom-restore.XXXXXX")
$tl restore "$job" --to "$out"
$tl verify "$job"
diff -r "$src" "$out" && echo "restored tree in $out is identical to $src"
$tl library status
