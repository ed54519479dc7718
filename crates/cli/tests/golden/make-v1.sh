#!/usr/bin/env bash
# How the golden tape images in v1/ were made (format version 1). Run once; the
# images are committed and must stay readable by every later tapeloom.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tl=${TAPELOOM:-$here/../../../../target/release/tapeloom}
work=$(mktemp -d)
src=$work/src
mkdir -p "$src/dir" "$src/empty"
printf 'hello, tape\n' > "$src/hello.txt"
python3 - "$src/dir/noise.bin" <<'PY'
import struct, sys
# The same xorshift as tests/it/common/tree.rs noise(7, 200000).
x = (7 * 0x9E3779B97F4A7C15) & (2**64 - 1) | 1
out = bytearray()
while len(out) < 200000:
    x ^= (x << 13) & (2**64 - 1); x ^= x >> 7; x ^= (x << 17) & (2**64 - 1)
    out += struct.pack('<Q', x)
open(sys.argv[1], 'wb').write(out[:200000])
PY
ln -s ../hello.txt "$src/dir/link"
touch -h -d '2020-01-02 03:04:05.123456789 UTC' "$src/hello.txt" "$src/dir/noise.bin" "$src/dir/link" "$src/dir" "$src/empty" "$src"
"$tl" --home "$work/home" library create --drives 1 --slots 2 --capacity 4M
"$tl" --home "$work/home" backup --block-size 64K --name golden "$src"
rm -rf "$here/v1"
mkdir -p "$here/v1/tapes"
cp "$work/home/library/tapes/TL0001L9.data" "$work/home/library/tapes/TL0001L9.idx" "$here/v1/tapes/"
rm -rf "$work"
