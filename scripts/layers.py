#!/usr/bin/env python3
"""Checks the layers: the front ends reach the catalog and the library only
through the operations crate, and only the engine's clock reads the system clock.

The front ends are the command line (crates/cli), the server (crates/server),
the HSM (crates/hsm) and the S3 front end (crates/s3). In their sources, outside comments and test modules, this
fails on:
  - a use of the catalog crate (`tapeloom_catalog`) or of the catalog of a home
    (`.catalog.`, `.catalog)`, `&home.catalog`, ...);
  - a library opened directly (`.library()`, `.virtual_library()`,
    `VirtualLibrary::`, `open_library`);
  - `tapeloom-catalog` among their Cargo dependencies (dev-dependencies may have it).
Anywhere in crates/, outside crates/engine/src/clock.rs: `SystemTime::now`.

Prints each finding as FILE:LINE: TEXT and exits 1 when there is one.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FRONT_ENDS = ["crates/cli", "crates/server", "crates/hsm", "crates/s3"]
DIRECT = [
    (re.compile(r"\btapeloom_catalog\b"), "the catalog crate"),
    (re.compile(r"\.catalog\b(?!\s*\()"), "a home's catalog"),
    (re.compile(r"\.(virtual_)?library\(\)"), "a library opened directly"),
    (re.compile(r"\bVirtualLibrary::|\bopen_library\b"), "a library opened directly"),
]
CLOCK = re.compile(r"SystemTime::now")


def code_lines(path):
    """Yields (number, line) of a Rust file, without comments and without the
    `#[cfg(test)]` module at its end."""
    in_tests = False
    for n, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#[cfg(test)]"):
            in_tests = True
        if in_tests:
            continue
        if stripped.startswith("//"):
            continue
        yield n, line.split("//", 1)[0] if "\"" not in line else line


def main():
    found = []
    for fe in FRONT_ENDS:
        toml = (ROOT / fe / "Cargo.toml").read_text()
        deps = toml.split("[dependencies]", 1)[1].split("\n[", 1)[0]
        if re.search(r"^tapeloom-catalog\b", deps, re.M):
            found.append(f"{fe}/Cargo.toml: depends on tapeloom-catalog")
        for path in sorted((ROOT / fe / "src").rglob("*.rs")):
            for n, line in code_lines(path):
                for pattern, what in DIRECT:
                    if pattern.search(line):
                        rel = path.relative_to(ROOT)
                        found.append(f"{rel}:{n}: {what}: {line.strip()}")
                        break
    for path in sorted((ROOT / "crates").rglob("*.rs")):
        if path == ROOT / "crates/engine/src/clock.rs":
            continue
        for n, line in code_lines(path):
            if CLOCK.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: the system clock outside the engine's clock: {line.strip()}")
    for f in found:
        print(f)
    print(f"layers: {len(found)} direct calls past the operations layer or the clock")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
