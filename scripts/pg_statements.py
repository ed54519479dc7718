#!/usr/bin/env python3
"""Every SQL statement the catalog crate can send has run on PostgreSQL.

A statement's call site is a line of crates/catalog/src (outside db.rs and the
test modules) that calls a method of the catalog's connection that runs SQL:
execute, execute_batch, query_all, query_row, copy_in, or a prepared
statement's execute, query, query_map or raw_execute. The catalog, built with its
feature statement-log, writes the call site of each statement it runs on
PostgreSQL to the file TAPELOOM_TEST_PG_STATEMENTS names; the test command sets
it while the catalog's tests and the end-to-end suite run on PostgreSQL. A line
marked `// SQLite only` is a statement of the SQLite catalog alone.

usage: scripts/pg_statements.py FILE    (exit 1 when a call site never ran)
"""
import os
import re
import sys

CALL = re.compile(r"\.(execute|execute_batch|query_all|query_row|copy_in|query|query_map|raw_execute)\(")
SRC = "crates/catalog/src"


def call_sites():
    sites = []
    for d, _, files in os.walk(SRC):
        for f in sorted(files):
            if not f.endswith(".rs") or f == "db.rs":
                continue
            path = os.path.join(d, f)
            text = open(path, encoding="utf-8").read()
            # The test module closes each file that has one.
            cut = re.search(r"\n#\[cfg\(test\)\]\nmod ", text)
            if cut:
                text = text[: cut.start()]
            lines = text.split("\n")
            for i, line in enumerate(lines):
                if not CALL.search(line) or line.lstrip().startswith("//"):
                    continue
                marked = "SQLite only" in line or (i > 0 and "SQLite only" in lines[i - 1])
                if not marked:
                    sites.append(f"{path}:{i + 1}")
    return sorted(sites)


def main():
    ran = set(open(sys.argv[1]).read().split()) if os.path.exists(sys.argv[1]) else set()
    sites = call_sites()
    missing = [s for s in sites if s not in ran]
    for s in missing:
        print(f"  never run on PostgreSQL: {s}")
    print(f"catalog statements: {len(sites)} call sites, {len(sites) - len(missing)} run on PostgreSQL, "
          f"{len(missing)} never run on PostgreSQL")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
