#!/usr/bin/python3
"""An HTTP/1.1 upstream that misbehaves on request, for tests/e2e_reverse_proxy.sh and
tests/e2e_proxy_websocket.sh.

usage: upstream_faults.py PORT [CERT KEY]   (with CERT and KEY: over TLS, Python's ssl)

Each path is one way an upstream fails (a well-behaved server cannot be made to):
  /ok              200 "ok", kept alive
  /conns           200, the body is how many connections were accepted so far
  /slow-head?s=N   the head only after N seconds
  /slow-body       a head announcing 10 bytes, 5 of them, the rest after half a second
  /stall-body?s=N  a head announcing 10 bytes, 5 of them, then silence for N seconds
  /status?c=N      a status line of code N and reason "Upstream Words", body "ok"
  /reset           a head announcing 100000 bytes, 1000 of them, then a reset
  /cut             a head announcing 100000 bytes, 1000 of them, then a clean close (over
                   TLS with close_notify)
  /half            half a head, then the write side shut
  /close-early     the connection closed before any response
  /cl-te           Content-Length and Transfer-Encoding: chunked together
  /two-cl          two different Content-Lengths
  /te-gzip         Transfer-Encoding: gzip
  /fold            a folded (obs-fold) header line
  /fold-split      the /fold response a byte at a time (each read of the proxy holds one)
  /late            200 "ok" kept alive, then, 0.3 s later on the same connection, a second
                   response nobody asked for
  /late-close      200 "ok" kept alive, then the connection closed 0.3 s later
  /conn-fields     200 with three Connection fields naming X-A and X-B (and keep-alive)
  /status-20       a status code of two digits (llhttp reads it as 20)
  /double          a complete response, then a second one nobody asked for
  /sse             chunked events: one now, one 2 seconds later, then the end
  /switch-unasked  a 101 whatever was asked, then what looks like a second response
  /switch-nameless a 101 without the Upgrade field that names the protocol
  /head-fields     200, the body is the request's fields as name=value|, sorted
  /not-modified    304 with the Content-Length of the 200 it stands for (RFC 9110 8.6), no body
  /no-content-te   204 naming chunked coding, no body
  /many-fields     200 with 100 fields besides Content-Length
  /many-dropped    200 with 130 Keep-Alive fields (none passed on) and one other
  /switch-many     a 101 naming websocket with 130 fields, then nothing
  /switch-flood    a 101 that answers the key, then 128 MiB as fast as the proxy takes them
  /switch-other    a 101 that answers the key but names another protocol (h2c)
  /switch-two-accepts  a 101 with two Sec-WebSocket-Accept fields, a wrong one first
  /stray-FRAMING   a response framed by length, chunked, head (for HEAD), 204, 304 or 1xx
                   (a 103 first), then at once a second response nobody asked for
  /bare-cr-status  a bare CR inside the status line, before what looks like a field
  /bare-cr-chunk-PLACE  a chunked response with a bare CR in its framing - PLACE: size (a
                   chunk-size line), ext (a chunk extension), data (a chunk's data's end),
                   last (the last chunk), trailer (a trailer line), end (the trailers' end) -
                   and at once behind it a second response nobody asked for; with ?split the
                   head goes first and alone
Anything the request carries as a body is read (Content-Length or chunked) first.
"""
import base64
import hashlib
import socket
import socketserver
import ssl
import sys
import threading
import time

accepted = 0
lock = threading.Lock()


def read_head(f):
    lines = []
    while True:
        line = f.readline(65536)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line.decode("latin-1").rstrip("\r\n"))


def read_body(f, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(f.readline().split(b";")[0], 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return body
            body += f.read(size)
            f.readline()
    n = int(headers.get("content-length", "0") or 0)
    return f.read(n) if n else b""


def accept(key):
    """The Sec-WebSocket-Accept that answers key (RFC 6455 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode() + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()).decode()


def respond(sock, status, body, extra=""):
    sock.sendall(("HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n" % (status, len(body), extra)).encode() + body)


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        global accepted
        with lock:
            accepted += 1
        s = self.request
        f = s.makefile("rb")
        while True:
            head = read_head(f)
            if not head:
                return
            method, target, _ = head[0].split(" ", 2)
            headers = {}
            for h in head[1:]:
                k, _, v = h.partition(":")
                headers[k.strip().lower()] = v.strip()
            read_body(f, headers)
            path, _, query = target.partition("?")
            if path == "/ok":
                respond(s, "200 OK", b"ok\n")
            elif path == "/conns":
                respond(s, "200 OK", b"%d\n" % accepted)
            elif path == "/slow-head":
                time.sleep(float(query.split("=")[1]))
                respond(s, "200 OK", b"late\n")
            elif path == "/slow-body":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345")
                time.sleep(0.5)
                s.sendall(b"67890")
            elif path == "/stall-body":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345")
                time.sleep(float(query.split("=")[1]))
                return
            elif path == "/status":
                respond(s, "%s Upstream Words" % query.split("=")[1], b"ok\n")
            elif path == "/reset":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000)
                time.sleep(0.2)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                s.close()
                return
            elif path == "/cut":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 1000)
                time.sleep(0.2)
                if isinstance(s, ssl.SSLSocket):
                    s = s.unwrap()
                s.close()
                return
            elif path == "/half":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Len")
                s.shutdown(socket.SHUT_WR)
                time.sleep(2)
                return
            elif path == "/close-early":
                return
            elif path == "/cl-te":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                          b"5\r\nhello\r\n0\r\n\r\n")
            elif path == "/two-cl":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 8\r\n\r\nhellohel")
            elif path == "/te-gzip":
                s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nhello")
            elif path == "/status-20":
                s.sendall(b"HTTP/1.1 20 OK\r\nContent-Length: 2\r\n\r\nok")
            elif path == "/fold":
                s.sendall(b"HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\nContent-Length: 2\r\n\r\nok")
            elif path == "/fold-split":
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                for b in b"HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\nContent-Length: 2\r\n\r\nok":
                    s.sendall(bytes([b]))
                    time.sleep(0.01)
            elif path == "/late":
                respond(s, "200 OK", b"ok\n")
                time.sleep(0.3)
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nSMUGGLED\n")
            elif path == "/late-close":
                respond(s, "200 OK", b"ok\n")
                time.sleep(0.3)
                return
            elif path == "/conn-fields":
                respond(s, "200 OK", b"ok\n", "Connection: x-a\r\nX-A: 1\r\nConnection: keep-alive\r\nX-B: 2\r\n"
                        "X-C: 3\r\nConnection: x-b\r\n")
            elif path == "/double":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nfirst\n"
                          b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nSMUGGLED\n")
            elif path == "/switch-unasked":
                s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
                          b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nSMUGGLED\n")
                time.sleep(0.5)
                return
            elif path == "/switch-nameless":
                s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\nraw bytes")
                time.sleep(0.5)
                return
            elif path == "/head-fields":
                respond(s, "200 OK", ("".join("%s=%s|" % kv for kv in sorted(headers.items())) + "\n").encode())
            elif path == "/not-modified":
                s.sendall(b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\nContent-Length: 10\r\n\r\n")
            elif path == "/no-content-te":
                s.sendall(b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n")
            elif path == "/many-fields":
                respond(s, "200 OK", b"ok\n", "".join("X-F%d: %d\r\n" % (i, i) for i in range(100)))
            elif path == "/many-dropped":
                respond(s, "200 OK", b"ok\n", "".join("Keep-Alive: timeout=%d\r\n" % i for i in range(130)) + "X-F: 1\r\n")
            elif path == "/switch-many":
                s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
                          b"".join(b"X-F%d: %d\r\n" % (i, i) for i in range(130)) + b"\r\n")
                time.sleep(1)
                return
            elif path == "/switch-flood":
                s.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Accept: %s\r\n\r\n" % accept(headers.get("sec-websocket-key", ""))).encode())
                chunk = b"\x82\x7e\xff\xfc" + b"f" * 65532       # binary frames of 65532 bytes
                try:
                    for _ in range(2048):
                        s.sendall(chunk)
                except OSError:
                    pass
                return
            elif path == "/switch-other":
                s.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Accept: %s\r\n\r\n" % accept(headers.get("sec-websocket-key", ""))).encode())
                time.sleep(0.5)
                return
            elif path == "/switch-two-accepts":
                s.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Accept: wrong\r\nSec-WebSocket-Accept: %s\r\n\r\n"
                           % accept(headers.get("sec-websocket-key", ""))).encode())
                time.sleep(0.5)
                return
            elif path.startswith("/stray-"):
                # A response, then at once a second one nobody asked for, in every framing.
                # The head goes first and alone, so that the proxy has read it before the
                # rest comes: a body of known length is then read exactly, and the stray
                # response waits in the socket behind it.
                framing = path[len("/stray-"):]
                stray = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nSMUGGLED\n"
                body = b"x" * 20000
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if framing == "length":
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
                    time.sleep(0.05)
                    s.sendall(body + stray)
                elif framing == "chunked":
                    s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                    time.sleep(0.05)
                    s.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) + stray)
                elif framing == "head":     # asked with HEAD: the head is all of it
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + stray)
                elif framing == "204":
                    s.sendall(b"HTTP/1.1 204 No Content\r\n\r\n" + stray)
                elif framing == "304":
                    s.sendall(b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n" + stray)
                elif framing == "1xx":
                    s.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
                    time.sleep(0.05)
                    s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
                    time.sleep(0.05)
                    s.sendall(body + stray)
                else:
                    respond(s, "404 Not Found", b"no\n")
            elif path == "/bare-cr-status":
                s.sendall(b"HTTP/1.1 200 OK\rXTransfer-Encoding: chunked\r\n\r\n"
                          b"9\r\nSMUGGLED\n\r\n0\r\n\r\n")
            elif path.startswith("/bare-cr-chunk-"):
                # Each is where llhttp, left to itself, took the byte after the CR for an
                # LF: the response ends (or goes on) where another parser would not.
                place = path[len("/bare-cr-chunk-"):]
                framing = {
                    "size": b"5\rX\r\nhello\r\n0\r\n\r\n",
                    "ext": b"5\r\nhello\r\n0;a=b\rX\r\n\r\n",
                    "data": b"5\r\nhello\rX0\r\n\r\n",
                    "last": b"5\r\nhello\r\n0\rX\r\n\r\n",
                    "trailer": b"5\r\nhello\r\n0\r\nX-T: t\r\n\rX",
                    "end": b"5\r\nhello\r\n0\r\n\rX",
                }.get(place)
                if framing is None:
                    respond(s, "404 Not Found", b"no\n")
                    continue
                head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                stray = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nSMUGGLED\n"
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if query == "split":
                    s.sendall(head)
                    time.sleep(0.05)
                    s.sendall(framing + stray)
                else:
                    s.sendall(head + framing + stray)
            elif path == "/sse":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
                s.sendall(b"9\r\ndata: 1\n\n\r\n")
                time.sleep(2)
                s.sendall(b"9\r\ndata: 2\n\n\r\n0\r\n\r\n")
            else:
                respond(s, "404 Not Found", b"no\n")


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    tls = None

    def get_request(self):
        sock, addr = self.socket.accept()
        if self.tls:               # the handshake happens in the handler's thread, on first use
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr


if __name__ == "__main__":
    server = Server(("127.0.0.1", int(sys.argv[1])), Handler)
    if len(sys.argv) > 3:
        server.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.tls.load_cert_chain(sys.argv[2], sys.argv[3])
    server.serve_forever()
