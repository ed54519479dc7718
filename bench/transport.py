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

It also measures the file work a server must do with every byte it receives
(`files`), in one process, with no backup around it either:

  stage_write   the bytes written 1 MiB at a time into files of 64 MiB (a
                stage's chunks), each flushed to disk (fsync), renamed, and its
                folder flushed, before the next: what makes a received stream
                survive a kill.
  stage_read    the same files read back 1 MiB at a time, then deleted.
  cartridge     the bytes written 1 MiB at a time into one file as the virtual
                cartridge writes them (handed to the disk every 32 MiB, the
                window before waited for and dropped from the page cache,
                fdatasync at the end).
  cartridge_direct  the same with O_DIRECT, from page-aligned memory (the
                lever the virtual cartridge does not use: its blocks are not in
                aligned memory, and a copy into it costs most of what it saves).

The files go to a folder on the repository's file system (as a home would).

For OpenSSL each end is a process forked from this one: the sender writes 1 MiB
at a time, the receiver reads into a buffer of 1 MiB. A TLS receiver gets one
record (16 KiB) per read, so about 65,000 calls of Python's per GiB are counted
with it; they cost a few hundredths of a second. The rustls figures are each
thread's own CPU time, in one process.

  python3 bench/transport.py
  python3 bench/transport.py --gib 2
"""

import argparse, ctypes, json, os, resource, socket, ssl, subprocess, sys, tempfile

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


STAGE_CHUNK = 64 << 20
WRITE_BEHIND = 32 << 20


def sync_file_range(fd, offset, length, flags):
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.sync_file_range(fd, ctypes.c_longlong(offset), ctypes.c_longlong(length), ctypes.c_uint(flags))
    if r != 0:
        raise OSError(ctypes.get_errno(), "sync_file_range")


def stage_write(folder, total, buf):
    """Writes `total` bytes as 64 MiB chunk files, each flushed and renamed; returns their paths."""
    paths = []
    left = total
    while left > 0:
        n = min(left, STAGE_CHUNK)
        part = os.path.join(folder, f"{len(paths):06}.part")
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        done = 0
        while done < n:
            done += os.write(fd, buf[: min(CHUNK, n - done)])
        os.fsync(fd)
        os.close(fd)
        path = part[: -len(".part")] + ".chunk"
        os.rename(part, path)
        dfd = os.open(folder, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        paths.append(path)
        left -= n
    return paths


def stage_read(paths):
    buf = bytearray(CHUNK)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass
        os.unlink(path)


def cartridge_write(path, total, buf):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    end = handed = dropped = 0
    while end < total:
        end += os.pwrite(fd, buf[: min(CHUNK, total - end)], end)
        if end - handed >= WRITE_BEHIND:
            sync_file_range(fd, handed, end - handed, 2)  # SYNC_FILE_RANGE_WRITE
            if dropped < handed:
                sync_file_range(fd, dropped, handed - dropped, 7)  # wait, write, wait
                os.posix_fadvise(fd, dropped, handed - dropped, os.POSIX_FADV_DONTNEED)
            dropped, handed = handed, end
    os.fdatasync(fd)
    os.close(fd)
    os.unlink(path)


def cartridge_direct(path, total):
    import mmap

    buf = mmap.mmap(-1, CHUNK)
    buf.write(os.urandom(CHUNK))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o600)
    end = 0
    while end < total:
        end += os.pwrite(fd, buf, end)
    os.fdatasync(fd)
    os.close(fd)
    os.unlink(path)
    buf.close()


def files_floor(gib, rounds, folder=None):
    """Median CPU seconds per GiB of the stage's writes, its reads, and the cartridge's writes."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from engine import default_work_parent  # noqa: E402

    total = int(gib * (1 << 30)) // CHUNK * CHUNK
    per = total / (1 << 30)
    buf = memoryview(os.urandom(CHUNK))
    rows = []
    with tempfile.TemporaryDirectory(prefix="tapeloom-transport-", dir=folder or default_work_parent()) as d:
        for _ in range(rounds):
            t0 = cpu_self()
            paths = stage_write(d, total, buf)
            t1 = cpu_self()
            stage_read(paths)
            t2 = cpu_self()
            cartridge_write(os.path.join(d, "cartridge.data"), total, buf)
            t3 = cpu_self()
            cartridge_direct(os.path.join(d, "direct.data"), total)
            t4 = cpu_self()
            rows.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3))
    med = [round(sorted(r[i] for r in rows)[len(rows) // 2] / per, 3) for i in range(4)]
    names = ("stage_write", "stage_read", "cartridge", "cartridge_direct")
    return {f"{n}_cpu_s_per_gib": m for n, m in zip(names, med)}


def floor(gib=1.0, rounds=3):
    """Both stacks' figures, and the file work's."""
    return {"rustls": rustls_floor(gib, rounds), "openssl": openssl_floor(gib, rounds),
            "files": files_floor(gib, rounds)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(json.dumps({"bench": "transport", "cores": os.cpu_count(), **floor(a.gib, a.rounds)}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
