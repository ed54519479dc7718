#!/usr/bin/env python3
"""Where a block lies after a load: one file from the middle of a job restored
from an unloaded cartridge, with the drive's compression on and off. One JSON
document on stdout (progress on stderr); it exits 1 when a check failed.

For each setting, a library of one LTO-3 drive (the model at full scale, the
virtual clock, cartridges of the generation's 400 GB, no payload kept) gets a
job of --size (20G) generated data that compresses about 2:1 (`gen:hp-typical`),
written with `--drive-compression on` or `off` and no software compression.
The cartridge is unloaded and the file nearest the job's middle block restored;
the drive's modeled locate seconds and its seconds to the first wanted block
(the load, the locate or the reading through, whichever the restore chose)
come from the restore's report. With the drive's compression on, the blocks lie
about half as far along the tape as their bytes would put them, and a drive
that loads the cartridge again must place them there, by the cartridge's tape
directory (FORMAT.md 8): the first block must come sooner with compression on
than with it off. Beside each, `bench
locate` gives the model's locate from the beginning of the tape to where the
block was written (its host offset over the compression the job's report
gives).

  python3 bench/locate_after_load.py
  python3 bench/locate_after_load.py --size 4G
"""
import argparse, json, os, shutil, subprocess, sys

from engine import default_work_parent, log, REPO

BLOCK = 262144


def tl(a, home, *args):
    cmd = [a.bin, "--json"] + (["--home", home] if home else []) + [str(x) for x in args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tapeloom {' '.join(map(str, args))}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def one(a, work, compression):
    home = os.path.join(work, f"compression-{compression}")
    shutil.rmtree(home, ignore_errors=True)
    tl(a, home, "library", "create", "--drives", 1, "--slots", 2, "--model", "lto3",
       "--clock", "virtual", "--payload", "none")
    log(f"compression {compression}: backup of {a.size}")
    job = tl(a, home, "backup", "--concurrency", 1, "--drive-compression", compression,
             "--compress", "none", f"gen:hp-typical:{a.size}")
    files = [e for e in tl(a, home, "ls", job["job_id"])["entries"]
             if e.get("type") == "file" and e.get("size", 0) > 0]
    files.sort(key=lambda e: e["block"])
    middle = files[-1]["block"] / 2
    entry = min(files, key=lambda e: abs(e["block"] - middle))
    ratio = job["drives"][0].get("compression_ratio") or 1.0
    tl(a, home, "library", "unload")
    out = os.path.join(home, "out")
    r = tl(a, home, "restore", job["job_id"], "--to", out, entry["path"])
    shutil.rmtree(out, ignore_errors=True)
    d = r["drives"][0]
    at = entry["block"] * BLOCK / ratio
    model = tl(a, None, "bench", "locate", "--model", "lto3", "--from", 0, "--to", int(at))
    shutil.rmtree(home, ignore_errors=True)
    return {"job_bytes": job["bytes"], "compression_ratio": ratio, "block": entry["block"],
            "tape_offset_gb": round(at / 1e9, 2),
            "locate_seconds": round(d.get("locate_seconds") or 0.0, 1),
            "first_block_seconds": round(d.get("first_block_seconds") or 0.0, 1),
            "model_locate_seconds": round(model["modeled_seconds"], 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "tapeloom"))
    ap.add_argument("--size", default="20G")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = a.work or os.path.join(default_work_parent(), "tapeloom-locate-after-load")
    os.makedirs(work, exist_ok=True)
    doc = {"bench": "locate_after_load", "size": a.size,
           "on": one(a, work, "on"), "off": one(a, work, "off")}
    failed = []
    on, off = doc["on"], doc["off"]
    if not on["compression_ratio"] > 1.5:
        failed.append(f"the data did not compress: {on['compression_ratio']}")
    if not on["first_block_seconds"] < off["first_block_seconds"]:
        failed.append(f"with compression the first block does not come sooner: "
                      f"{on['first_block_seconds']} s against {off['first_block_seconds']} s")
    doc.update(failed=failed, **{"pass": not failed})
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(doc, indent=2))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
