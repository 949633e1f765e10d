#!/usr/bin/python3
"""HTTP/1.1 clients over TLS that read a large response slowly through small TCP segments:
each of N connections (MSS 1400, a 4 KiB receive buffer) GETs PATH and reads 16 KiB every
20 ms for SECONDS, so the server's socket takes a little at each wake-up and never all it
has.  Prints the bytes read in all.

    tests/h1_slow_reader.py PORT PATH N SECONDS
"""
import socket
import ssl
import sys
import time


def main():
    port, path, n, seconds = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    socks = []
    for _ in range(n):
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1400)
        raw.settimeout(10)
        raw.connect(("127.0.0.1", port))
        s = ctx.wrap_socket(raw)
        s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (path, port)).encode())
        socks.append(s)
    got, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for s in socks:
            got += len(s.recv(16384))
        time.sleep(0.02)
    print(got, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
