#!/usr/bin/env python3
"""Time to the first byte of one file from an unloaded cartridge, for LTO-3,
LTO-5, LTO-7 and LTO-9, at the start, the middle and the end of a full cartridge
and on average over 100 random places: emulated restores, and the drive model's
arithmetic at full scale beside them. One JSON document on stdout, and the table
on stderr.

Emulated. For each generation, a library that keeps no payload is made with the
generation's model on the virtual clock, scaled so that its cartridge holds
4.5 GB (`--scale` shrinks the capacity, the rates and the buffer, and keeps the
tape's length, its wraps, the locate speed and the load time: a place on the
scaled cartridge is the same place on the tape as on a full-size one, and a
locate to it takes as long). A backup of 16 generator sources of 256 MiB, one
after another (`--concurrency 1`), stored as they are (`--drive-compression off
--compress none`, so that the drive model places each block read after a load
where it was written), fills it to about 95%. Then,
for each place, the cartridge is unloaded and one file restored
(`restore JOB PATH`), its blocks made again from the generator as they are read:

  load     the load and thread time (the model's `load_seconds` times the loads);
  locate   the drive's modeled locate seconds (`drives[].locate_seconds`);
  read     the rest of the time to the first wanted block
           (`drives[].first_block_seconds` less load and locate): the rewind and
           label read after the load, and the first block read at the scaled
           rate (slower than at full scale by the scale).

The places are the first file on tape, the file nearest the middle block, the
last file, and the files nearest 100 random places (the same fractions for every
generation).

Model. The same places (each file's block as a fraction of the cartridge) on a
full-size cartridge (its native capacity), from tapeloom's own commands: load from `drive models`, locate from
`bench locate --model GEN --from 0 --to OFFSET`, read as one command and one
256 KiB block at the native rate.

  python3 bench/restore_table.py
  python3 bench/restore_table.py --random 20 --only lto9
"""
import argparse, json, os, random, shutil, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import REPO, log, tapeloom_ok  # noqa: E402

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


# Bytes the scaled cartridge holds, and the job that fills it.
CARTRIDGE = 4.5e9
STREAMS = 16
STREAM_SIZE = "256M"


def emulated(a, g, places):
    """Restores of one file at the start, middle and end, and at `places`, from a
    cartridge of generation `g` filled by a generated job."""
    m = a.models[g]
    scale = CARTRIDGE / m["capacity_bytes"]
    home = os.path.join(a.work, g)
    shutil.rmtree(home, ignore_errors=True)
    tapeloom_ok(a.bin, home, ["library", "create", "--drives", 1, "--slots", 2,
                              "--capacity", "20G", "--model", g, "--scale", scale,
                              "--clock", "virtual", "--payload", "none"])
    sources = [f"gen:hp-typical:{STREAM_SIZE}:{i + 1}" for i in range(STREAMS)]
    log(f"{g}: backup of {STREAMS} x {STREAM_SIZE} at scale {scale:.6f}")
    job = tapeloom_ok(a.bin, home, ["backup", "--concurrency", 1, "--drive-compression", "off",
                                    "--compress", "none", *sources])
    vols = job["drives"][0]["cartridges"]
    used = vols[0]["volume_statistics"]["used_native_capacity_mb"] * 1e6 if vols else None
    files = [e for e in tapeloom_ok(a.bin, home, ["ls", job["job_id"]])["entries"]
             if e.get("type") == "file" and e.get("size", 0) > 0]
    files.sort(key=lambda e: e["block"])
    last = files[-1]["block"]

    def nearest(block):
        return min(files, key=lambda e: abs(e["block"] - block))

    def one(entry):
        tapeloom_ok(a.bin, home, ["library", "unload"])
        out = os.path.join(home, "out")
        shutil.rmtree(out, ignore_errors=True)
        r = tapeloom_ok(a.bin, home, ["restore", job["job_id"], "--to", out, entry["path"]])
        shutil.rmtree(out, ignore_errors=True)
        d = r["drives"][0]
        load = m["load_seconds"] * r["loads"]
        locate = d.get("locate_seconds") or 0.0
        first = d["first_block_seconds"]
        return {"block": entry["block"], "place": entry["block"] * BLOCK / CARTRIDGE,
                "load_s": round(load, 3), "locate_s": round(locate, 3),
                "read_s": round(first - load - locate, 3), "total_s": round(first, 3)}

    row = {"scale": scale, "job_bytes": job["bytes"], "cartridge_bytes": CARTRIDGE,
           "used_bytes": used, "files": len(files),
           "start": one(files[0]), "middle": one(nearest(last / 2)), "end": one(files[-1])}
    rand = [one(nearest(f * last)) for f in places]
    row["random_places"] = [r["place"] for r in rand]
    row["random_average"] = {k: round(sum(r[k] for r in rand) / len(rand), 3)
                             for k in ("load_s", "locate_s", "read_s", "total_s")}
    shutil.rmtree(home, ignore_errors=True)
    return row


def model_row(a, g, em):
    """The model's arithmetic on a full-size cartridge, at the emulated places."""
    cap = a.models[g]["capacity_bytes"]
    row = {"capacity_bytes": cap}
    for where in ("start", "middle", "end"):
        row[where] = first_byte(a, g, em[where]["place"] * cap)
    rand = [first_byte(a, g, f * cap) for f in em["random_places"]]
    row["random_average"] = {k: round(sum(r[k] for r in rand) / len(rand), 3)
                             for k in rand[0]}
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/tapeloom"))
    ap.add_argument("--random", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default="/var/tmp/tapeloom-restore-table")
    ap.add_argument("--only", default=",".join(GENERATIONS))
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    a.models = {m["name"]: m for m in tl(a, "drive", "models")["models"]}
    rnd = random.Random(a.seed)
    places = [rnd.random() for _ in range(a.random)]
    out = {"benchmark": "restore_table", "block_bytes": BLOCK, "random_places": a.random,
           "generations": {}}
    t0 = time.monotonic()
    os.makedirs(a.work, exist_ok=True)
    for g in a.only.split(","):
        em = emulated(a, g, places)
        out["generations"][g] = {"emulated": em, "model": model_row(a, g, em)}
    shutil.rmtree(a.work, ignore_errors=True)
    out["seconds"] = round(time.monotonic() - t0, 1)
    print(f"{'':6} {'where':8} {'load s':>7} {'locate s':>9} {'read s':>7} {'first byte s':>13}"
          f" {'model s':>8}", file=sys.stderr)
    for g, both in out["generations"].items():
        for where in ("start", "middle", "end", "random_average"):
            r, mr = both["emulated"][where], both["model"][where]
            print(f"{g:6} {where.replace('random_average', 'random'):8} {r['load_s']:7.1f} "
                  f"{r['locate_s']:9.1f} {r['read_s']:7.3f} {r['total_s']:13.1f}"
                  f" {mr['total_s']:8.1f}", file=sys.stderr)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
