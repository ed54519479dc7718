#!/usr/bin/env python3
"""What moving bytes over loopback costs, with no backup around it: the CPU
seconds per GiB of a sender and of a receiver of plain TCP, and of TLS 1.3, on
two stacks. One JSON document on stdout.

  rustls   tapeloom's own: rustls with the ring provider, the server's
           certificate and the client's pinning
           (`crates/proto/examples/tls_floor.rs`, built here with cargo).
  openssl  Python's `ssl` (OpenSSL), the same suite (AES-256-GCM).

The figures are the floor under any backup through a server: every byte a
client sends is encrypted and copied into the socket by the client, then copied
out and decrypted by the server, whatever else either does. `bench/net_cpu.py`
prints them beside its own figures.

For OpenSSL each end is a process forked from this one: the sender writes 1 MiB
at a time, the receiver reads into a buffer of 1 MiB. A TLS receiver gets one
record (16 KiB) per read, so about 65,000 calls of Python's per GiB are counted
with it; they cost a few hundredths of a second. The rustls figures are each
thread's own CPU time, in one process.

  python3 bench/transport.py
  python3 bench/transport.py --gib 2
"""

import argparse, json, os, resource, socket, ssl, subprocess, sys, tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHUNK = 1 << 20


def cpu_self():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(fn, out):
    """Runs fn in a forked process; writes its CPU seconds to pipe `out`."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            t0 = cpu_self()
            fn()
            os.write(out, f"{cpu_self() - t0}\n".encode())
        except BaseException as e:  # the child's failure is said, then its status
            print(f"transport: {e}", file=sys.stderr)
            code = 1
        finally:
            os._exit(code)
    return pid


def send(sock, total, wrap):
    s = wrap(sock) if wrap else sock
    buf = memoryview(os.urandom(CHUNK))
    sent = 0
    while sent < total:
        s.sendall(buf)
        sent += CHUNK
    # Closed only once the receiver says it has everything: a socket closed with
    # bytes unread (TLS 1.3's session tickets) would reset the connection and
    # drop what the receiver had not read yet.
    s.recv(1)
    s.close()


def recv(conn, total, wrap):
    s = wrap(conn) if wrap else conn
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    got = 0
    while got < total:
        n = s.recv_into(view)
        if n == 0:
            break
        got += n
    s.sendall(b"k")
    s.close()
    if got < total:
        raise SystemExit(f"the receiver got {got} of {total} bytes")


def measure(total, tls, certs):
    """(sender CPU s, receiver CPU s) for `total` bytes."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    port = lsock.getsockname()[1]
    swrap = rwrap = None
    if tls:
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.minimum_version = ssl.TLSVersion.TLSv1_3
        sctx.load_cert_chain(certs["cert"], certs["key"])
        cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        cctx.minimum_version = ssl.TLSVersion.TLSv1_3
        cctx.load_verify_locations(certs["cert"])
        cctx.check_hostname = False
        rwrap = lambda c: sctx.wrap_socket(c, server_side=True)  # noqa: E731
        swrap = lambda c: cctx.wrap_socket(c)  # noqa: E731
    rr, rw = os.pipe()
    sr, sw = os.pipe()

    def receiver():
        conn, _ = lsock.accept()
        recv(conn, total, rwrap)

    def sender():
        c = socket.create_connection(("127.0.0.1", port))
        send(c, total, swrap)

    rpid = child(receiver, rw)
    spid = child(sender, sw)
    for pid in (spid, rpid):
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise SystemExit("a transport child failed")
    os.close(rw)
    os.close(sw)
    lsock.close()
    figures = []
    for fd in (sr, rr):
        with os.fdopen(fd) as f:
            text = f.read().strip()
        if not text:
            raise SystemExit("a transport child gave no figure")
        figures.append(float(text))
    return figures[0], figures[1]


def make_cert(folder):
    cert, key = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    return {"cert": cert, "key": key}


def median_of(rows, key, side):
    xs = sorted(r[key][side] for r in rows)
    return xs[len(xs) // 2]


def rustls_floor(gib, rounds):
    """The example's figures, median of `rounds` runs."""
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "tapeloom-proto", "--example", "tls_floor"],
                   cwd=REPO, check=True)
    exe = os.path.join(REPO, "target", "release", "examples", "tls_floor")
    rows = [json.loads(subprocess.run([exe, str(gib)], check=True, capture_output=True, text=True).stdout)
            for _ in range(rounds)]
    return {k: {s: median_of(rows, k, s) for s in ("send_cpu_s_per_gib", "recv_cpu_s_per_gib")}
            for k in ("tcp", "tls")}


def openssl_floor(gib, rounds):
    """Median CPU seconds per GiB of each end, plain TCP and TLS, through Python."""
    total = int(gib * (1 << 30)) // CHUNK * CHUNK
    per = total / (1 << 30)
    with tempfile.TemporaryDirectory() as d:
        certs = make_cert(d)
        out = {}
        for name, tls in (("tcp", False), ("tls", True)):
            rows = [measure(total, tls, certs) for _ in range(rounds)]
            send_s = sorted(r[0] for r in rows)[len(rows) // 2] / per
            recv_s = sorted(r[1] for r in rows)[len(rows) // 2] / per
            out[name] = {"send_cpu_s_per_gib": round(send_s, 3), "recv_cpu_s_per_gib": round(recv_s, 3)}
    return out


def floor(gib=1.0, rounds=3):
    """Both stacks' figures."""
    return {"rustls": rustls_floor(gib, rounds), "openssl": openssl_floor(gib, rounds)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(json.dumps({"bench": "transport", "cores": os.cpu_count(), **floor(a.gib, a.rounds)}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
