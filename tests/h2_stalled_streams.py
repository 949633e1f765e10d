#!/usr/bin/python3
"""HTTP/2 clients that ask for bodies and never let them come: each of NCONNS connections
sets SETTINGS_INITIAL_WINDOW_SIZE to 0 before it opens NSTREAMS streams that GET PATH, so
the server may send every response's head but no DATA.  Prints "heads N" once every
stream's head has come (or after 30 s, with as many as came), then holds the connections
until its standard input closes.

    tests/h2_stalled_streams.py PORT PATH NCONNS NSTREAMS
"""
import select
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings


def main():
    port, path, nconns, nstreams = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    conns = []
    for _ in range(nconns):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        for _ in range(nstreams):
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, [(":method", "GET"), (":scheme", "http"), (":path", path),
                                    (":authority", "127.0.0.1:%d" % port)], end_stream=True)
        sock.sendall(conn.data_to_send())
        conns.append((sock, conn))
    heads, deadline = 0, time.monotonic() + 30
    while heads < nconns * nstreams and time.monotonic() < deadline:
        ready, _, _ = select.select([s for s, _ in conns], [], [], 1)
        for sock in ready:
            conn = next(c for s, c in conns if s is sock)
            data = sock.recv(65536)
            if not data:
                print("closed by the server after %d heads" % heads, flush=True)
                return 1
            for event in conn.receive_data(data):
                heads += isinstance(event, h2.events.ResponseReceived)
            sock.sendall(conn.data_to_send())
    print("heads %d" % heads, flush=True)
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
