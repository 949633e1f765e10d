#!/usr/bin/python3
"""A storm of TLS clients arriving at once: tls_storm.py PORT N [SECONDS].

Opens N connections to 127.0.0.1:PORT and sends each the same TLS 1.3 ClientHello (made
once with Python's ssl over memory buffers: the server's work per connection - its key
exchange and signature - is the same as for N real clients, the client's is nothing),
after first opening one connection of its own that completes its handshake.  While the
server works through the storm, that established connection asks for /-/healthz.  Then it
waits up to SECONDS (default 30) for each storm connection to get the server's first
flight (or be closed without one).  Prints:
  flights=K silent_closes=C unanswered=U healthz=STATUS healthz_ms=T
"""
import selectors
import socket
import ssl
import sys
import time

port, n = int(sys.argv[1]), int(sys.argv[2])
limit = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.set_alpn_protocols(["http/1.1"])
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ctx.wrap_bio(inc, out, server_hostname="localhost")
try:
    obj.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = out.read()

est = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")

sel = selectors.DefaultSelector()
socks = []
for i in range(n):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    socks.append(s)
    sel.register(s, selectors.EVENT_WRITE)
pending_send = set(socks)
flights = silent = 0
start = time.monotonic()
health_status, health_ms = "none", -1
asked = False
while sel.get_map() and time.monotonic() - start < limit:
    if not pending_send and not asked:
        asked = True
        t0 = time.monotonic()
        est.sendall(b"GET /-/healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        est.settimeout(limit)
        try:
            line = est.recv(4096).split(b"\r\n", 1)[0]
            health_status = line.split(b" ")[1].decode() if line.startswith(b"HTTP/1.1 ") else "bad"
        except OSError as e:
            health_status = "error:" + type(e).__name__
        health_ms = int((time.monotonic() - t0) * 1000)
    for key, ev in sel.select(timeout=0.2):
        s = key.fileobj
        if ev & selectors.EVENT_WRITE and s in pending_send:
            try:
                s.sendall(hello)
            except OSError:
                sel.unregister(s)
                silent += 1
                pending_send.discard(s)
                continue
            pending_send.discard(s)
            sel.modify(s, selectors.EVENT_READ)
        elif ev & selectors.EVENT_READ:
            try:
                got = s.recv(65536)
            except OSError:
                got = b""
            if got:
                flights += 1
            else:
                silent += 1
            sel.unregister(s)
unanswered = len(sel.get_map())
for s in socks:
    s.close()
print(f"flights={flights} silent_closes={silent} unanswered={unanswered} healthz={health_status} healthz_ms={health_ms}")
