#!/usr/bin/python3
"""An HTTP/2 server (python3-h2) that misbehaves as an HTTP/2 upstream can, for the proxy tests.

  upstream_h2_faults.py PORT [WINDOW [CERT KEY [ALPN]]]

h2c, or with CERT and KEY over TLS (Python's ssl), offering ALPN's "h2" or the protocol
ALPN names ("none": no ALPN at all).  With WINDOW (0: the default windows), the server opens its flow-control windows (the connection's and each
stream's) that wide at once and never acknowledges data after: a client that has the
window must send without being prompted (gRPC's servers open theirs as wide, BDP-probed).

By path:
  /ok            200 "ok\n", then waits for the next request on the connection
  /rst-head      RST_STREAM(INTERNAL_ERROR) before any response
  /rst-body      the head and 5 bytes of a 100-byte body, then RST_STREAM(INTERNAL_ERROR)
  /goaway        GOAWAY(last_stream_id 0, NO_ERROR): the request was never taken
  /goaway-after  200 "bye\n", then GOAWAY(NO_ERROR) on the connection
  /close-body    the head and 5 bytes of a 100-byte body, then the TCP connection closes
  /grpc-error    a trailers-only gRPC answer: :status 200, grpc-status 13 in the head
  /trailers      200, body "t\n", trailers x-t: 1 and grpc-status: 0
  /noread        never opens its flow-control window: a body stops after 64 KiB, no answer
  /slow          200 "slow\n" after a second (so that many connections are open at once)
  /count         200, the number of body bytes received
  /scheme        200, the request's :scheme
Each connection is counted; GET /conns (on any connection) answers how many were made."""
import socket, ssl, sys, threading, time
import h2.connection, h2.config, h2.events, h2.errors, h2.settings

conns = 0
lock = threading.Lock()

window = int(sys.argv[2]) if len(sys.argv) > 2 else 0
tls = None
if len(sys.argv) > 4:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(sys.argv[3], sys.argv[4])
    alpn = sys.argv[5] if len(sys.argv) > 5 else "h2"
    if alpn != "none":
        tls.set_alpn_protocols([alpn])

def handle(sock):
    global conns
    if tls:
        try:
            sock = tls.wrap_socket(sock, server_side=True)
        except (OSError, ssl.SSLError):
            sock.close()
            return
    with lock:
        conns += 1
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    c.initiate_connection()
    if window:
        c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        c.increment_flow_control_window(window - 65535)
    paths = {}
    schemes = {}
    slow = []                      # (when, stream) of /slow answers to come, in order
    received = {}
    try:
        sock.sendall(c.data_to_send())
        while True:
            # /slow answers come from this thread too (an SSL socket takes one thread at a time)
            sock.settimeout(max(0.01, slow[0][0] - time.monotonic()) if slow else None)
            try:
                data = sock.recv(65536)
            except socket.timeout:
                data = None
            while slow and slow[0][0] <= time.monotonic():
                sid = slow.pop(0)[1]
                c.send_headers(sid, [(":status", "200"), ("content-length", "5")])
                c.send_data(sid, b"slow\n", end_stream=True)
            if data is None:
                sock.sendall(c.data_to_send())
                continue
            if not data:
                return
            for ev in c.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    paths[ev.stream_id] = dict(ev.headers).get(":path", "")
                    schemes[ev.stream_id] = dict(ev.headers).get(":scheme", "")
                if isinstance(ev, h2.events.DataReceived):
                    received[ev.stream_id] = received.get(ev.stream_id, 0) + len(ev.data)
                    if not window and paths.get(ev.stream_id) != "/noread":
                        c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if isinstance(ev, h2.events.StreamEnded):
                    sid = ev.stream_id
                    p = paths.get(sid, "")
                    if p in ("/ok", "/conns", "/count", "/scheme"):
                        body = ("%d\n" % conns if p == "/conns" else
                                "%d\n" % received.get(sid, 0) if p == "/count" else
                                schemes.get(sid, "") + "\n" if p == "/scheme" else "ok\n").encode()
                        c.send_headers(sid, [(":status", "200"), ("content-length", str(len(body)))])
                        c.send_data(sid, body, end_stream=True)
                    elif p == "/rst-head":
                        c.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
                    elif p in ("/rst-body", "/close-body"):
                        c.send_headers(sid, [(":status", "200"), ("content-length", "100")])
                        c.send_data(sid, b"12345")
                        if p == "/rst-body":
                            c.reset_stream(sid, h2.errors.ErrorCodes.INTERNAL_ERROR)
                        else:
                            sock.sendall(c.data_to_send())
                            sock.close()
                            return
                    elif p == "/goaway":
                        c.close_connection(h2.errors.ErrorCodes.NO_ERROR, last_stream_id=0)
                    elif p == "/goaway-after":
                        c.send_headers(sid, [(":status", "200"), ("content-length", "4")])
                        c.send_data(sid, b"bye\n", end_stream=True)
                        c.close_connection(h2.errors.ErrorCodes.NO_ERROR, last_stream_id=sid)
                    elif p == "/grpc-error":
                        c.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc"),
                                             ("grpc-status", "13"), ("grpc-message", "boom")], end_stream=True)
                    elif p == "/slow":
                        slow.append((time.monotonic() + 1, sid))
                    elif p == "/trailers":
                        c.send_headers(sid, [(":status", "200"), ("content-type", "text/plain")])
                        c.send_data(sid, b"t\n")
                        c.send_headers(sid, [("x-t", "1"), ("grpc-status", "0")], end_stream=True)
                    else:
                        c.send_headers(sid, [(":status", "404"), ("content-length", "0")], end_stream=True)
            out = c.data_to_send()
            if out:
                sock.sendall(out)
    except (OSError, ssl.SSLError, h2.exceptions.ProtocolError):
        pass
    finally:
        sock.close()

def main():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen(100)
    while True:
        a, _ = s.accept()
        threading.Thread(target=handle, args=(a,), daemon=True).start()

if __name__ == "__main__":
    main()
