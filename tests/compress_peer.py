#!/usr/bin/python3
"""The peers of tests/e2e_compress.sh: an HTTP/1.1 upstream whose answers test compression
on the fly through the reverse proxy, and the clients that decode what h2park sends with
Debian's decoders (zlib, brotli, zstandard) as it arrives.

  compress_peer.py upstream PORT ACKDIR
      /json      a JSON body with Content-Length      /chunked  the same, chunked
      /encoded   a gzip body with Content-Encoding: gzip (must pass untouched)
      /notransform  JSON with Cache-Control: no-transform
      /sse?n=N&id=ID[&delay=S]  N server-sent events (the first S seconds after the head),
                      event i sent only once ACKDIR/ID.(i-1) exists (the client decoded
                      the one before), at most 10 s later: else ACKDIR/ID.late is written
                      and the rest is sent anyway
      /big?mib=N  N MiB of JSON-like text, chunked, as fast as the proxy reads it
  compress_peer.py sse URL PROTO CODING N ID ACKDIR [CAFILE]
      reads the stream over PROTO (h1, tls, h2c) asking for CODING, decodes each piece as
      it comes, and after each whole event writes ACKDIR/ID.i; prints "ok N" or the fault
  compress_peer.py decode CODING FILE   the decoded bytes of FILE on stdout
  compress_peer.py same LIST             for each line "NAME CODING FILE REF" of LIST: "NAME ok"
                                         if FILE decoded with CODING is REF's bytes, else "NAME bad"
  compress_peer.py bigsum CODING         decodes stdin as it comes: "LEN SHA256"
  compress_peer.py bigref MIB            what /big?mib=MIB sends: "LEN SHA256"
"""
import hashlib
import http.server
import json
import os
import socket
import socketserver
import ssl
import sys
import time
import urllib.parse
import zlib


def decoder(coding):
    if coding == "gzip":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return d.decompress
    if coding == "br":
        import brotli
        d = brotli.Decompressor()
        return d.process
    if coding == "zstd":
        import zstandard
        d = zstandard.ZstdDecompressor().decompressobj()
        return d.decompress
    return lambda b: b


def payload():
    rows = [{"id": i, "name": "user%d" % i, "email": "user%d@example.com" % i, "active": i % 3 == 0,
             "roles": ["reader", "writer"][: i % 2 + 1], "score": (i * 7919) % 1000 / 10} for i in range(2000)]
    return json.dumps(rows).encode()


def big_block(i):
    return (b'{"seq":%08d,"kind":"tick","payload":"' % i) + b"abcdefghij" * 6500 + b'"}\n'


class Upstream(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    ackdir = "."

    def log_message(self, *a):
        pass

    def send_body(self, body, ctype="application/json", extra=()):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        if u.path == "/json":
            return self.send_body(payload())
        if u.path == "/notransform":
            return self.send_body(payload(), extra=[("Cache-Control", "no-transform")])
        if u.path == "/encoded":
            return self.send_body(gzip_bytes(payload()[:5000]), extra=[("Content-Encoding", "gzip")])
        if u.path in ("/chunked", "/sse", "/big"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if u.path == "/sse" else "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            if u.path == "/sse":
                self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            if u.path == "/chunked":
                body = payload()
                for i in range(0, len(body), 7000):
                    self.chunk(body[i:i + 7000])
            elif u.path == "/sse":
                n, sid = int(q.get("n", "5")), q.get("id", "x")
                self.wfile.flush()
                time.sleep(float(q.get("delay", "0")))
                for i in range(n):
                    if i:
                        ack = os.path.join(self.ackdir, "%s.%d" % (sid, i - 1))
                        deadline = time.time() + 10
                        while not os.path.exists(ack) and time.time() < deadline:
                            time.sleep(0.005)
                        if not os.path.exists(ack):
                            open(os.path.join(self.ackdir, sid + ".late"), "w").write(str(i))
                    self.chunk(sse_event(i))
            else:
                for i in range(int(q.get("mib", "1")) * 16):
                    self.chunk(big_block(i))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        self.send_error(404)


def gzip_bytes(b):
    c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(b) + c.flush()


def sse_event(i):
    data = json.dumps({"event": i, "user": "user%d" % (i % 10), "text": "hello " * (30 + i % 50),
                       "items": list(range(i % 40))})
    return ("id: %d\nevent: update\ndata: %s\n\n" % (i, data)).encode()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def sse_client(url, proto, coding, n, sid, ackdir, cafile=None):
    u = urllib.parse.urlparse(url)
    host, port, path = u.hostname, u.port, u.path + ("?" + u.query if u.query else "")
    dec = decoder(coding)
    got = b""
    expect = [sse_event(i) for i in range(n)]
    seen = 0
    enc_seen = None

    def take(piece):
        nonlocal got, seen
        got += dec(piece)
        while seen < n and got.startswith(b"".join(expect[: seen + 1])):
            open(os.path.join(ackdir, "%s.%d" % (sid, seen)), "w").close()
            seen += 1

    if proto in ("h1", "tls"):
        import http.client
        if proto == "tls":
            ctx = ssl.create_default_context(cafile=cafile)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=30)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=30)
        conn.request("GET", path, headers={"Accept-Encoding": coding})
        resp = conn.getresponse()
        enc_seen = resp.getheader("content-encoding")
        while True:
            piece = resp.read1(65536)
            if not piece:
                break
            take(piece)
    else:
        import h2.connection
        import h2.config
        import h2.events
        s = socket.create_connection((host, port), timeout=30)
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        c.initiate_connection()
        c.send_headers(1, [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", host),
                           ("accept-encoding", coding)], end_stream=True)
        s.sendall(c.data_to_send())
        done = False
        while not done:
            data = s.recv(65536)
            if not data:
                break
            for ev in c.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    enc_seen = dict(ev.headers).get("content-encoding")
                elif isinstance(ev, h2.events.DataReceived):
                    c.acknowledge_received_data(ev.flow_controlled_length, 1)
                    take(ev.data)
                elif isinstance(ev, h2.events.StreamEnded):
                    done = True
            s.sendall(c.data_to_send())
    if enc_seen != coding:
        print("content-encoding %r, not %r" % (enc_seen, coding))
    elif got != b"".join(expect):
        print("decoded %d bytes, %d events whole; differ from what was sent" % (len(got), seen))
    elif os.path.exists(os.path.join(ackdir, sid + ".late")):
        print("event %s was not decodable before the upstream sent the next" %
              open(os.path.join(ackdir, sid + ".late")).read())
    else:
        print("ok %d" % seen)


def main():
    cmd = sys.argv[1]
    if cmd == "upstream":
        Upstream.ackdir = sys.argv[3]
        Server(("127.0.0.1", int(sys.argv[2])), Upstream).serve_forever()
    elif cmd == "sse":
        sse_client(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6], sys.argv[7],
                   sys.argv[8] if len(sys.argv) > 8 else None)
    elif cmd == "decode":
        dec = decoder(sys.argv[2])
        sys.stdout.buffer.write(dec(open(sys.argv[3], "rb").read()))
    elif cmd == "same":
        for line in open(sys.argv[2]):
            name, coding, f, ref = line.split()
            try:
                good = decoder(coding)(open(f, "rb").read()) == open(ref, "rb").read()
            except Exception:
                good = False
            print(name, "ok" if good else "bad")
    elif cmd == "bigsum":
        dec = decoder(sys.argv[2])
        h, n = hashlib.sha256(), 0
        while True:
            piece = sys.stdin.buffer.read1(1 << 20)
            if not piece:
                break
            out = dec(piece)
            h.update(out)
            n += len(out)
        print(n, h.hexdigest())
    elif cmd == "bigref":
        h, n = hashlib.sha256(), 0
        for i in range(int(sys.argv[2]) * 16):
            b = big_block(i)
            h.update(b)
            n += len(b)
        print(n, h.hexdigest())


if __name__ == "__main__":
    main()
