#!/usr/bin/env python3
"""Regenerates the calibration and parameter tables of docs/DRIVE-MODEL.md from what
`tapeloom bench drive`, `bench locate` and `drive models` print, next to the published
figures from the source documents. `--check` fails when the document is out of date.

    python3 bench/calibrate.py [--tapeloom target/release/tapeloom] [--check]
"""
import argparse, json, os, re, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "..", "docs", "DRIVE-MODEL.md")

# (what, command args, JSON field to read, published figure, accepted range, source)
CASES = [
    ("LTO-1 native, 256 KiB blocks", ["bench", "drive", "--model", "lto1", "--block-sizes", "256K", "--size", "1G", "--compression", "off"], "rate", "15 MB/s", (14, 16), "003 (IBM)"),
    ("LTO-1 at 2:1, 256 KiB", ["bench", "drive", "--model", "lto1", "--block-sizes", "256K", "--size", "1G", "--pattern", "ratio:2"], "rate", "30 MB/s", (28, 31), "003 (IBM)"),
    ("LTO-1 native, 128 KiB", ["bench", "drive", "--model", "lto1", "--block-sizes", "128K", "--size", "1G", "--compression", "off"], "rate", "full speed from 128 KB", (14, 16), "003 (IBM)"),
    ("LTO-1 native, 1 KiB", ["bench", "drive", "--model", "lto1", "--block-sizes", "1K", "--size", "256M", "--compression", "off"], "rate", "small blocks slow", (0, 7.5), "003 (IBM)"),
    ("LTO-2 random, 128 KiB", ["bench", "drive", "--model", "lto2", "--block-sizes", "128K", "--size", "2G"], "rate", "29.6 MB/s", (28.5, 31), "000 (OpenBench)"),
    ("LTO-2 at 1.86:1, 128 KiB", ["bench", "drive", "--model", "lto2", "--block-sizes", "128K", "--size", "2G", "--pattern", "ratio:1.86"], "rate", "55 MB/s", (52, 58), "000 (OpenBench)"),
    ("LTO-2 random, compression off", ["bench", "drive", "--model", "lto2", "--block-sizes", "128K", "--size", "2G", "--compression", "off"], "rate", "same as on", (28.5, 31), "000 (OpenBench)"),
    ("LTO-3 native, 256 KiB", ["bench", "drive", "--model", "lto3", "--block-sizes", "256K", "--compression", "off"], "rate", "80 MB/s", (76, 84), "004 (HP)"),
    ("LTO-3 at 2:1, 256 KiB", ["bench", "drive", "--model", "lto3", "--block-sizes", "256K", "--pattern", "ratio:2"], "rate", "160 MB/s", (150, 165), "004 (HP)"),
    ("LTO-3 fed at 40 MB/s: backhitches", ["bench", "drive", "--model", "lto3", "--block-sizes", "256K", "--source-rate", "40MB"], "backhitches", "0 (matching 27-80)", (0, 0), "004 (HP)"),
    ("LTO-3 fed at 20 MB/s: backhitches", ["bench", "drive", "--model", "lto3", "--block-sizes", "256K", "--source-rate", "20MB"], "backhitches", "> 0 (below 27)", (1, 1e9), "004 (HP)"),
    ("LTO-9 native, 256 KiB", ["bench", "drive", "--model", "lto9", "--block-sizes", "256K", "--size", "20G", "--compression", "off"], "rate", "400 MB/s", (380, 410), "vendor data sheets"),
    ("LTO-1 locate to 17 GB", ["bench", "locate", "--model", "lto1", "--from", "0", "--to", "17G"], "equivalent", "141 MB/s (append to EOT)", (100, 1e9), "002 (NERSC)"),
    ("LTO-1 space over 100 MB files", ["bench", "locate", "--model", "lto1", "--from", "0", "--to", "10G", "--space-files", "--file-size", "100MB"], "equivalent", "15 MB/s (fsf)", (12, 16), "002 (NERSC)"),
]

def run(tl, args):
    out = subprocess.run([tl, "--json"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if out.returncode != 0:
        sys.exit(f"tapeloom {' '.join(args)} failed: {out.stderr.decode().strip()}")
    return json.loads(out.stdout)

def calibration(tl):
    lines = ["| figure | published | source | model | in range | command |", "|---|---|---|---:|---|---|"]
    bad = []
    for what, args, field, published, (lo, hi), source in CASES:
        v = run(tl, args)
        if field == "rate":
            x = v["rows"][0]["host_mb_per_s"]; shown = f"{x:.1f} MB/s"
        elif field == "backhitches":
            x = v["rows"][0]["backhitches"]; shown = f"{x}"
        else:
            x = v["equivalent_mb_per_s"]; shown = f"{x:.1f} MB/s"
        ok = lo <= x <= hi
        if not ok:
            bad.append(what)
        cmd = "tapeloom " + " ".join(args)
        lines.append(f"| {what} | {published} | {source} | {shown} | {'yes' if ok else 'NO'} | `{cmd}` |")
    return "\n".join(lines) + "\n", bad

def parameters(tl):
    v = run(tl, ["drive", "models"])
    lines = ["| model | native MB/s | speed steps MB/s | buffer MiB | interface MB/s | command µs | capacity GB | backhitch s | tape m | wraps | locate m/s | first-load calibration s |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in v["models"]:
        steps = m["speed_steps_mb_per_s"]
        st = f"{steps[0]:g}-{steps[-1]:g} ({len(steps)})" if len(steps) > 1 else f"{steps[0]:g} (fixed)"
        lines.append(f"| {m['name']} | {m['native_mb_per_s']:g} | {st} | {m['buffer_bytes']/1048576:g} | {m['interface_mb_per_s']:g} | {m['command_seconds']*1e6:g} | {m['capacity_bytes']/1e9:g} | {m['backhitch_seconds']:g} | {m['tape_m']:g} | {m['wraps']} | {m['locate_m_per_s']:g} | {m['first_load_calibration_seconds']:g} |")
    return "\n".join(lines) + "\n"

def replace(doc, name, body):
    pat = re.compile(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)", re.S)
    if not pat.search(doc):
        sys.exit(f"docs/DRIVE-MODEL.md has no {name} markers")
    return pat.sub(lambda m: m.group(1) + body + m.group(2), doc)

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tapeloom", default=os.path.join(HERE, "..", "target", "release", "tapeloom"))
    ap.add_argument("--check", action="store_true", help="fail if the document differs from what the commands print")
    a = ap.parse_args()
    doc = open(DOC).read()
    table, bad = calibration(a.tapeloom)
    new = replace(replace(doc, "calibration", table), "parameters", parameters(a.tapeloom))
    if a.check:
        if new != doc:
            sys.exit("docs/DRIVE-MODEL.md is out of date: run python3 bench/calibrate.py")
        print("docs/DRIVE-MODEL.md matches what the commands print")
    else:
        open(DOC, "w").write(new)
        print("docs/DRIVE-MODEL.md updated")
    if bad:
        sys.exit("out of range: " + ", ".join(bad))

if __name__ == "__main__":
    main()
