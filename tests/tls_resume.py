#!/usr/bin/python3
"""A returning TLS client: tls_resume.py VERSION STEP... where VERSION is 1.2 or 1.3 and
each STEP is PORT:NAME (connect to 127.0.0.1:PORT with SNI and Host NAME, offering the
session the first step got - the first step offers none - and GET /, Connection: close)
or "wait" (print "waiting", flush, and read a line from stdin before going on: the test
reloads the daemon meanwhile).  Prints one line per connection: "reused=True|False
status=CODE", or "error=..." when the connection failed."""
import socket
import ssl
import sys

ver = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[sys.argv[1]]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.minimum_version = ctx.maximum_version = ver
session = None
for step in sys.argv[2:]:
    if step == "wait":
        print("waiting", flush=True)
        sys.stdin.readline()
        continue
    port, name = step.split(":", 1)
    try:
        with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname=name, session=session) as t:
                t.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % name.encode())
                data = b""
                while True:
                    d = t.recv(65536)
                    if not d:
                        break
                    data += d
                status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.1 ") else "none"
                print(f"reused={t.session_reused} status={status}", flush=True)
                if session is None:
                    session = t.session     # (TLS 1.3: the ticket came with the response)
    except (OSError, ssl.SSLError) as e:
        print(f"error={e}", flush=True)
