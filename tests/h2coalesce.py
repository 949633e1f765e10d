#!/usr/bin/python3
"""HTTP/2 connection reuse across names, as browsers do it (RFC 9113 9.1.1): one TLS
connection made with SNI NAME (its certificate verified against CAFILE), then one request
for each AUTHORITY in turn on that same connection.  Prints one line per request:

    AUTHORITY STATUS BODY(first line)

and a last line "connections 1".  With python3-h2, the HTTP/2 stack of Python's clients.
H2_PAUSE=SECONDS waits that long between requests (a test reloads the server meanwhile).

    tests/h2coalesce.py PORT NAME CAFILE AUTHORITY...
"""
import os
import socket
import ssl
import sys
import time

import h2.config
import h2.connection
import h2.events


def main():
    port, name, cafile, authorities = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock = ctx.wrap_socket(raw, server_hostname=name)
    if sock.selected_alpn_protocol() != "h2":
        print("no h2:", sock.selected_alpn_protocol())
        return 1
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    for i, authority in enumerate(authorities):
        if i and os.environ.get("H2_PAUSE"):
            time.sleep(float(os.environ["H2_PAUSE"]))
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [(":method", "GET"), (":scheme", "https"), (":authority", authority),
                                (":path", "/")], end_stream=True)
        sock.sendall(conn.data_to_send())
        status, body, done = None, b"", False
        while not done:
            data = sock.recv(65536)
            if not data:
                print(authority, "connection closed")
                return 1
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
                    status = dict(ev.headers).get(b":status", b"?").decode()
                elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                    body += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)) and ev.stream_id == sid:
                    done = True
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    print(authority, "GOAWAY")
                    return 1
            sock.sendall(conn.data_to_send())
        print(authority, status, body.decode(errors="replace").split("\n")[0])
    print("connections 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
