#!/usr/bin/env python3
"""Time to the first byte of one file from an unloaded cartridge, as the drive
model gives it, for LTO-3, LTO-5, LTO-7 and LTO-9. One JSON document on stdout,
and the table on stderr.

For each generation, the file lies at the start, the middle or the end of a full
cartridge (its native capacity, so the end is the last block), and at 100 random
places (the same places, as fractions of the cartridge, for every generation).
The time is three parts, each from tapeloom's own commands:

  load     the model's load and thread time (`drive models --json`: load_seconds);
  locate   from the beginning of the tape, where a load leaves it, to the file's
           first block (`bench locate --model GEN --from 0 --to OFFSET --json`);
  read     the first block: one command and one 256 KiB block at the native rate
           (`command_seconds` and `native_mb_per_s` of `drive models`).

  python3 bench/restore_table.py
"""
import argparse, json, os, random, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import REPO  # noqa: E402

GENERATIONS = ["lto3", "lto5", "lto7", "lto9"]
BLOCK = 256 * 1024


def tl(a, *args):
    p = subprocess.run([a.bin, "--json", *map(str, args)], capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        sys.exit(f"tapeloom {' '.join(map(str, args))} failed: {p.stderr.strip()}")
    return json.loads(p.stdout)


def first_byte(a, model, offset):
    m = a.models[model]
    loc = tl(a, "bench", "locate", "--model", model, "--from", 0, "--to", int(offset))
    read = m["command_seconds"] + BLOCK / (m["native_mb_per_s"] * 1e6)
    parts = {"load_s": m["load_seconds"], "locate_s": loc["modeled_seconds"], "read_s": read}
    parts["total_s"] = sum(parts.values())
    return {k: round(v, 3) for k, v in parts.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/tapeloom"))
    ap.add_argument("--random", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    a.models = {m["name"]: m for m in tl(a, "drive", "models")["models"]}
    rnd = random.Random(a.seed)
    places = [rnd.random() for _ in range(a.random)]
    out = {"benchmark": "restore_table", "block_bytes": BLOCK, "random_places": a.random,
           "generations": {}}
    for g in GENERATIONS:
        cap = a.models[g]["capacity_bytes"]
        end = cap - BLOCK
        row = {"capacity_bytes": cap,
               "start": first_byte(a, g, 0),
               "middle": first_byte(a, g, cap / 2),
               "end": first_byte(a, g, end)}
        rand = [first_byte(a, g, f * end) for f in places]
        row["random_average"] = {k: round(sum(r[k] for r in rand) / len(rand), 3)
                                 for k in rand[0]}
        out["generations"][g] = row
    print(f"{'':6} {'where':8} {'load s':>7} {'locate s':>9} {'read s':>7} {'first byte s':>13}",
          file=sys.stderr)
    for g, row in out["generations"].items():
        for where in ("start", "middle", "end", "random_average"):
            r = row[where]
            print(f"{g:6} {where.replace('random_average', 'random'):8} {r['load_s']:7.1f} "
                  f"{r['locate_s']:9.1f} {r['read_s']:7.3f} {r['total_s']:13.1f}", file=sys.stderr)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
