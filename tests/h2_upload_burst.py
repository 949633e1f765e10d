#!/usr/bin/python3
"""An h2c client (python3-h2) whose upload comes in bursts, as gRPC's do.

  h2_upload_burst.py PORT PATH TOTAL

POSTs TOTAL bytes: the head and as much body as the stream's window allows leave in one
write, and so again at every WINDOW_UPDATE, so that the server finds a whole window of
body at once.  Prints the response body, or "timeout after N sent" when nothing moved for
5 seconds."""
import socket, sys, h2.connection, h2.config, h2.events
port, path, total = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port)); s.settimeout(5)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
c.initiate_connection(); s.sendall(c.data_to_send())
# the server's SETTINGS first, so that its window is known
while True:
    evs = c.receive_data(s.recv(65536)); s.sendall(c.data_to_send())
    if any(isinstance(e, h2.events.SettingsAcknowledged) for e in evs): break
c.send_headers(1, [(":method", "POST"), (":path", path), (":scheme", "http"), (":authority", "x"),
                   ("content-length", str(total))])
sent = 0
def push():
    global sent
    while sent < total:
        n = min(c.local_flow_control_window(1), c.max_outbound_frame_size, total - sent)
        if n <= 0: break
        c.send_data(1, b"u" * n, end_stream=(sent + n == total)); sent += n
    s.sendall(c.data_to_send())
push()
body = b""
try:
    while True:
        d = s.recv(65536)
        if not d: break
        for e in c.receive_data(d):
            if isinstance(e, h2.events.DataReceived):
                body += e.data; c.acknowledge_received_data(e.flow_controlled_length, 1)
            if isinstance(e, h2.events.StreamEnded):
                print(body.decode().strip()); sys.exit(0)
        push()
except socket.timeout:
    print("timeout after %d sent" % sent)
