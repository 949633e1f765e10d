#!/usr/bin/python3
"""tls_client.py PORT N full|resumed: N TLS connections to 127.0.0.1:PORT one after
another, each a GET /1k.bin over HTTP/1.1 then closed; "full" offers no session (every
handshake is a full one), "resumed" offers the session of the connection before (after a
first full one).  Prints "done=D resumed=R failed=F"."""
import socket
import ssl
import sys

port, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["http/1.1"])
session = None
done = resumed = failed = 0
for i in range(n):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as t:
                t.sendall(b"GET /1k.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                data = b""
                while True:
                    d = t.recv(65536)
                    if not d:
                        break
                    data += d
                ok = data.startswith(b"HTTP/1.1 200")
                done += ok
                failed += not ok
                resumed += t.session_reused
                if mode == "resumed":
                    session = t.session
    except (OSError, ssl.SSLError):
        failed += 1
print(f"done={done} resumed={resumed} failed={failed}")
