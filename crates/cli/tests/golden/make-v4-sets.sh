#!/usr/bin/env bash
# How the golden tape images in v4-sets/ were made (format version 4: a backup set
# "golden" of a full and an incremental. The incremental holds a metadata-only file
# (hello.txt, chmod 600), a deletion (gone.txt), and a new file with a hard link to
# it (added/a.txt, added/b.txt); the full holds a symlink and a hard link). Run
# once; the images are committed and must stay readable by every later tapeloom.
# The job dates come from TAPELOOM_NOW: $tl must be built with the test hooks
# (cargo build --release --features tapeloom/test-hooks).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tl=${TAPELOOM:-$here/../../../../target/release/tapeloom}
work=$(mktemp -d)
src=$work/src
mkdir -p "$src/dir" "$src/empty"
printf 'hello, tape\n' > "$src/hello.txt"
printf 'soon gone\n' > "$src/gone.txt"
python3 - "$src/dir/noise.bin" <<'PY'
import struct, sys
# The same xorshift as tests/it/common/tree.rs noise(7, 20000).
x = (7 * 0x9E3779B97F4A7C15) & (2**64 - 1) | 1
out = bytearray()
while len(out) < 20000:
    x ^= (x << 13) & (2**64 - 1); x ^= x >> 7; x ^= (x << 17) & (2**64 - 1)
    out += struct.pack('<Q', x)
open(sys.argv[1], 'wb').write(out[:20000])
PY
ln "$src/dir/noise.bin" "$src/dir/twin"
ln -s ../hello.txt "$src/dir/link"
chmod 644 "$src/hello.txt" "$src/gone.txt" "$src/dir/noise.bin"
touch -h -d '2020-01-02 03:04:05.123456789 UTC' "$src/hello.txt" "$src/gone.txt" "$src/dir/noise.bin" "$src/dir/link" "$src/dir" "$src/empty" "$src"
"$tl" --home "$work/home" library create --drives 1 --slots 2 --capacity 4M
TAPELOOM_NOW=2026-11-01T10:00:00Z "$tl" --home "$work/home" backup --block-size 64K --name golden --set golden --level full "$src"
sleep 1
chmod 600 "$src/hello.txt"
rm "$src/gone.txt"
mkdir "$src/added"
printf 'added later\n' > "$src/added/a.txt"
ln "$src/added/a.txt" "$src/added/b.txt"
touch -h -d '2021-03-04 05:06:07.5 UTC' "$src/added/a.txt" "$src/added" "$src"
TAPELOOM_NOW=2026-11-02T10:00:00Z "$tl" --home "$work/home" backup --block-size 64K --name golden --set golden --level incremental "$src"
rm -rf "$here/v4-sets"
mkdir -p "$here/v4-sets/tapes"
cp "$work/home/library/tapes/TL0001L9.data" "$work/home/library/tapes/TL0001L9.idx" "$here/v4-sets/tapes/"
rm -rf "$work"
