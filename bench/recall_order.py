#!/usr/bin/env python3
"""Recall order against the best found: for --files random files (100, 1,000
and 10,000 by default) of --file-size over --cartridges full cartridges of the
LTO-9 model, `tapeloom bench order` times the reading of each cartridge from
the beginning of the tape in block order, in the greedy walk's order (SLTF),
in the recall planner's order (the greedy walk improved by Or-opt for at most
150 ms a cartridge), and in the best order an offline search finds (Or-opt over
every place and runs of up to 16, from the planner's order, for up to
--search-seconds a cartridge). One JSON document on stdout; it exits 1 when a
check failed.

Checks, for each count: the planner's order is within 5% of the best found
offline, and planning takes at most 1 s of wall time (all cartridges).

  python3 bench/recall_order.py
  python3 bench/recall_order.py --files 1000 --search-seconds 30
"""
import argparse, json, os, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine import log, REPO  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", default=os.path.join(REPO, "target/release/tapeloom"))
    p.add_argument("--files", type=int, nargs="+", default=[100, 1000, 10000])
    p.add_argument("--cartridges", type=int, default=3)
    p.add_argument("--file-size", default="1M")
    p.add_argument("--model", default="lto9")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--search-seconds", type=int, default=120)
    a = p.parse_args()
    rows, failed, checks = [], [], 0
    t0 = time.monotonic()
    for n in a.files:
        log(f"{n} files over {a.cartridges} cartridges")
        r = subprocess.run([a.bin, "--json", "bench", "order", "--model", a.model, "--files", str(n),
                            "--cartridges", str(a.cartridges), "--file-size", a.file_size,
                            "--seed", str(a.seed), "--search-seconds", str(a.search_seconds)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            failed.append(f"{n} files: {r.stderr.strip()}")
            continue
        row = json.loads(r.stdout)
        row["planned_over_block"] = row["planned_seconds"] / row["block_seconds"]
        rows.append(row)
        log(f"  planned/offline {row['planned_over_offline']:.4f}, SLTF/offline "
            f"{row['sltf_over_offline']:.4f}, planning {row['planning_seconds']:.3f} s")
        checks += 2
        if row["planned_over_offline"] > 1.05:
            failed.append(f"{n} files: the planner's order is {row['planned_over_offline']:.3f} "
                          "of the best found offline (at most 1.05)")
        if row["planning_seconds"] > 1.0:
            failed.append(f"{n} files: planning took {row['planning_seconds']:.2f} s (at most 1)")
    doc = {"bench": "recall_order", "model": a.model, "cartridges": a.cartridges,
           "file_size": a.file_size, "rows": rows, "checks": checks, "failed": failed,
           "seconds": round(time.monotonic() - t0, 1)}
    print(json.dumps(doc, indent=1))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
