#!/usr/bin/python3
"""WebSocket over HTTP/2 (RFC 8441) for the tests: python3-h2 for the stream, python3-websockets'
own framing (websockets.frames) for what goes in its DATA - an extended CONNECT, then frames
both ways.

  ws_h2_client.py PORT PATH [tls] echo      "one", 300 KiB of binary and "three" echoed (a
                                            greeting "hello" first is let by), a close
                                            answered, the stream ended; prints "echoed 3"
  ws_h2_client.py PORT PATH [tls] first     the first message the server sends
  ws_h2_client.py PORT PATH [tls] status    the response's :status and fields, one per line
  ws_h2_client.py PORT PATH [tls] settings  whether the server offers SETTINGS_ENABLE_CONNECT_PROTOCOL
  ws_h2_client.py PORT PATH [tls] idle N    N tunnels on one connection, left idle until stdin
                                            closes ("open N" once they are), then each echoes once
  ws_h2_client.py PORT PATH [tls] protocol P   an extended CONNECT for :protocol P: the :status
  ws_h2_client.py PORT PATH [tls] reset N   N tunnels opened, then each reset (RST_STREAM) with
                                            the connection kept open; prints "reset N"
  ws_h2_client.py PORT PATH [tls] smuggle   an extended CONNECT that declares a content-length,
                                            its DATA an HTTP/1.1 request for PATH/smuggled
                                            (what an upstream reads as its next request if
                                            the body goes up behind the handshake): the :status
  ws_h2_client.py PORT PATH [tls] drain     one tunnel read as fast as it comes until the server
                                            ends it, the daemon's heap_alloc_bytes (/-/stats on
                                            PORT) looked at every 4 MiB; prints "drained BYTES,
                                            heap at most BYTES"
"""
import json
import socket
import ssl
import urllib.request
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings
from websockets.frames import Frame, Opcode
from websockets.streams import StreamReader

ENABLE_CONNECT_PROTOCOL = 8


class Client:
    def __init__(self, port, tls):
        s = socket.create_connection(("127.0.0.1", port))
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["h2"])
            s = ctx.wrap_socket(s, server_hostname="localhost")
        s.settimeout(15)
        self.s, self.port, self.tls = s, port, tls
        self.c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.c.initiate_connection()
        self.flush()
        self.offered = None
        self.responses, self.data, self.ended = {}, {}, set()
        while self.offered is None:
            self.pump()

    def flush(self):
        d = self.c.data_to_send()
        if d:
            self.s.sendall(d)

    def pump(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError("connection closed")
        for e in self.c.receive_data(d):
            if isinstance(e, h2.events.RemoteSettingsChanged):
                got = e.changed_settings.get(ENABLE_CONNECT_PROTOCOL)
                self.offered = bool(got and got.new_value == 1)
            elif isinstance(e, h2.events.ResponseReceived):
                self.responses[e.stream_id] = e.headers
            elif isinstance(e, h2.events.DataReceived):
                self.data[e.stream_id] = self.data.get(e.stream_id, b"") + e.data
                self.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)):
                self.ended.add(e.stream_id)
        self.flush()

    def connect(self, path, protocol="websocket"):
        sid = self.c.get_next_available_stream_id()
        self.c.send_headers(sid, [(":method", "CONNECT"), (":protocol", protocol), (":scheme", "https" if self.tls else "http"),
                                  (":path", path), (":authority", "127.0.0.1:%d" % self.port),
                                  ("sec-websocket-version", "13")])
        self.flush()
        while sid not in self.responses and sid not in self.ended:
            self.pump()
        return sid, dict(self.responses.get(sid, [(":status", "reset")]))

    def open_tunnels(self, path, count):
        """count tunnels on this connection, each answered 200: their stream ids."""
        sids = []
        for _ in range(count):
            sid, h = self.connect(path)
            assert h[":status"] == "200", h
            sids.append(sid)
        return sids

    def send(self, sid, opcode, payload):
        # A client's frames are masked (RFC 6455 5.3): websockets' serializer does it.
        data = Frame(opcode, payload).serialize(mask=True, extensions=[])
        while data:
            room = min(self.c.local_flow_control_window(sid), self.c.max_outbound_frame_size)
            if room <= 0:
                self.pump()
                continue
            self.c.send_data(sid, data[:room])
            data = data[room:]
            self.flush()

    def recv(self, sid):
        while True:
            buf = self.data.get(sid, b"")
            frame = parse(buf)
            if frame:
                f, used = frame
                self.data[sid] = buf[used:]
                return f
            if sid in self.ended:
                raise EOFError("stream %d ended" % sid)
            self.pump()


def parse(buf):
    """One unmasked server frame from buf: (Frame, bytes used), or None while incomplete."""
    reader = StreamReader()
    reader.feed_data(buf)
    gen = Frame.parse(reader.read_exact, mask=False, extensions=[])
    try:
        next(gen)
    except StopIteration as done:
        return done.value, len(buf) - len(reader.buffer)
    return None


def main():
    port, path = int(sys.argv[1]), sys.argv[2]
    args = sys.argv[3:]
    tls = bool(args and args[0] == "tls")
    if tls:
        args = args[1:]
    mode = args[0]
    cl = Client(port, tls)
    if mode == "settings":
        print("offered" if cl.offered else "not offered")
        return
    if mode == "protocol":
        print(cl.connect(path, args[1])[1][":status"])
        return
    if mode == "smuggle":
        smuggled = b"GET %s/smuggled HTTP/1.1\r\nHost: a\r\n\r\n" % path.rstrip("/").encode()
        sid = cl.c.get_next_available_stream_id()
        cl.c.send_headers(sid, [(":method", "CONNECT"), (":protocol", "websocket"), (":scheme", "https" if tls else "http"),
                                (":path", path), (":authority", "127.0.0.1:%d" % port),
                                ("sec-websocket-version", "13"), ("content-length", str(len(smuggled)))])
        cl.c.send_data(sid, smuggled)
        cl.flush()
        while sid not in cl.responses and sid not in cl.ended:
            cl.pump()
        print(dict(cl.responses.get(sid, [(":status", "reset")]))[":status"])
        return
    if mode == "status":
        sid, h = cl.connect(path)
        for k, v in sorted(h.items()):
            print("%s: %s" % (k, v))
        return
    if mode == "first":
        sid, h = cl.connect(path)
        assert h[":status"] == "200", h
        print(cl.recv(sid).data.decode())
        return
    if mode == "echo":
        sid, h = cl.connect(path)
        assert h[":status"] == "200", h
        n = 0
        for opcode, msg in [(Opcode.TEXT, b"one"), (Opcode.BINARY, b"\x00\x01" * 150000), (Opcode.TEXT, b"three")]:
            cl.send(sid, opcode, msg)
            f = cl.recv(sid)
            if not n and f.data == b"hello":
                f = cl.recv(sid)
            assert f.opcode == opcode and f.data == msg, (f.opcode, len(f.data))
            n += 1
        cl.send(sid, Opcode.CLOSE, b"\x03\xe8")
        f = cl.recv(sid)
        assert f.opcode == Opcode.CLOSE, f
        while sid not in cl.ended:
            cl.pump()
        print("echoed %d" % n)
        return
    if mode == "idle":
        count = int(args[1])
        sids = cl.open_tunnels(path, count)
        print("open %d" % count, flush=True)
        sys.stdin.read()
        for sid in sids:
            cl.send(sid, Opcode.TEXT, b"after idle")
            f = cl.recv(sid)
            if f.data == b"hello":
                f = cl.recv(sid)
            assert f.data == b"after idle", f
        print("echoed %d" % count)
        return
    if mode == "reset":
        count = int(args[1])
        sids = cl.open_tunnels(path, count)
        time.sleep(0.5)
        for sid in sids:
            cl.c.reset_stream(sid)
        cl.flush()
        time.sleep(1)
        print("reset %d" % count)
        return
    if mode == "drain":
        sid, h = cl.connect(path)
        assert h[":status"] == "200", h
        got, peak, looked = 0, 0, 0
        while sid not in cl.ended:
            cl.pump()
            got += len(cl.data.pop(sid, b""))
            if got - looked >= 4 << 20:
                looked = got
                with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                        "http://127.0.0.1:%d/-/stats" % port, timeout=10) as f:
                    peak = max(peak, json.load(f)["heap_alloc_bytes"])
        print("drained %d, heap at most %d" % (got, peak))
        return
    raise SystemExit("unknown mode " + mode)


main()
