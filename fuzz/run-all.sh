#!/bin/sh
# Runs every fuzz target in turn for HOURS hours in all (default 1), each for an equal
# share, with the bounds a finding is judged by: 2 GiB of memory, 10 s per input.
# Findings land in fuzz/artifacts/TARGET/. Needs a nightly toolchain and cargo-fuzz.
set -eu
cd "$(dirname "$0")"
hours=${1:-1}
targets=$(cargo +nightly fuzz list)
n=$(echo "$targets" | wc -l)
each=$(awk -v h="$hours" -v n="$n" 'BEGIN { printf "%d", h * 3600 / n }')
cargo +nightly fuzz build -O -a
for t in $targets; do
    mkdir -p "corpus/$t"
    echo "== $t for ${each}s"
    cargo +nightly fuzz run -O -a "$t" "corpus/$t" -- \
        -rss_limit_mb=2048 -timeout=10 -max_total_time="$each" || echo "!! $t found something: see artifacts/$t/"
done
