#!/usr/bin/env bash
# A PostgreSQL server of its own for the test command, on 127.0.0.1 and a free
# port, trusting local connections, without fsync (the tests check behaviour, not
# durability). Run as the postgres user when root (initdb refuses root).
#   scripts/pg_server.sh start DIR   prints the server's URL (user postgres)
#   scripts/pg_server.sh stop DIR    stops it by its process id and removes DIR
set -euo pipefail
cmd=$1 dir=$2
as=()
if [ "$(id -u)" -eq 0 ]; then as=(setpriv --reuid=postgres --regid=postgres --init-groups --); fi
case "$cmd" in
start)
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    mkdir -p "$dir"
    [ ${#as[@]} -eq 0 ] || chown postgres: "$dir"
    "${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust >"$dir/initdb.log" 2>&1
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=400" \
        start >/dev/null
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
stop)
    pid=$(head -1 "$dir/data/postmaster.pid" 2>/dev/null || true)
    if [ -n "$pid" ]; then
        # SIGINT is PostgreSQL's fast shutdown: clients are let go at once.
        kill -INT "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -rf "$dir"
    ;;
esac
