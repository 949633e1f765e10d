#!/usr/bin/python3
"""WebSocket clients through the reverse proxy, for tests/e2e_proxy_websocket.sh: the
python3-websockets client (its handshake and framing) and, where the bytes on the wire
matter, a raw socket.  Prints "ok NAME" or "FAIL NAME: why" per check, as the shell
tests do.

Usage: ws_client.py PROXY_PORT CASE [ARGS]
  basic              echo of text and 1 MiB binary, subprotocol, fields seen upstream,
                     server close code, pushes, 403 passed on, a non-upgraded answer
  early-frame        a frame sent in the same write as the handshake reaches the upstream
  tls                echo over TLS (wss://) to the proxy, plain to the upstream
  idle N STATS_PORT  N tunnels opened, left idle, /-/stats read, then each used again
  timeout SECONDS    a tunnel silent for longer than SECONDS is closed by the proxy
"""
import asyncio
import base64
import json
import os
import socket
import ssl
import sys
import time
import urllib.request

import websockets

PORT = int(sys.argv[1])
URL = "ws://127.0.0.1:%d" % PORT


def check(name, cond, why=""):
    print(("ok %s" % name) if cond else ("FAIL %s: %s" % (name, why)), flush=True)


def connect(path, **kw):
    return websockets.connect(URL + path, ping_interval=None, max_size=None, open_timeout=10, **kw)


async def basic():
    async with connect("/echo", subprotocols=["chat"]) as ws:
        await ws.send("hello")
        got = await asyncio.wait_for(ws.recv(), 10)
        check("ws_echo_text", got == "hello", repr(got))
        blob = os.urandom(1 << 20)
        await ws.send(blob)
        got = await asyncio.wait_for(ws.recv(), 20)
        check("ws_echo_1MiB_binary", got == blob, "got %d bytes" % len(got or b""))
        check("ws_subprotocol_negotiated", ws.subprotocol == "chat", repr(ws.subprotocol))
        via = ws.response_headers.get("Via", "")
        check("ws_101_via", "h2park" in via, repr(via))
    async with connect("/headers") as ws:
        seen = json.loads(await asyncio.wait_for(ws.recv(), 10))
        ok = (seen.get("upgrade", "").lower() == "websocket" and "upgrade" in seen.get("connection", "").lower()
              and seen.get("x-forwarded-for") == "127.0.0.1" and seen.get("x-forwarded-proto") == "http"
              and "sec-websocket-key" in seen and seen.get("host") == "127.0.0.1:%d" % PORT
              and "h2park" in seen.get("via", ""))
        check("ws_upstream_sees_upgrade_and_forwarded_fields", ok, json.dumps(seen))
    async with connect("/close") as ws:
        try:
            await asyncio.wait_for(ws.recv(), 10)
            check("ws_server_close_code", False, "a message instead of the close")
        except websockets.ConnectionClosed as e:
            check("ws_server_close_code", e.code == 4001 and e.reason == "bye", "%s %r" % (e.code, e.reason))
    async with connect("/push") as ws:
        got, first = [], None
        start = time.monotonic()
        try:
            while True:
                got.append(await asyncio.wait_for(ws.recv(), 10))
                if first is None:
                    first = time.monotonic() - start
        except websockets.ConnectionClosedOK:
            pass
        check("ws_push_20_messages_then_close", got == ["push %d" % i for i in range(20)], repr(got[:3]))
        # (That the tunnel passes messages on as they come is the echo's round trips above,
        # which a tunnel that held them back would deadlock; the time is a figure.)
        print("# ws push: the first message after %s s" % ("%.3f" % first if first is not None else "-"), flush=True)
    try:
        async with connect("/reject"):
            check("ws_403_passed_on", False, "the handshake succeeded")
    except websockets.InvalidStatusCode as e:
        check("ws_403_passed_on", e.status_code == 403, str(e))
    # An upgrade the upstream does not take: its answer, and the connection stays HTTP.
    s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    req = ("GET /plain HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
           "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n" % base64.b64encode(os.urandom(16)).decode())
    s.sendall((req + "GET /-/healthz HTTP/1.1\r\nHost: x\r\n\r\n").encode())
    data = b""
    deadline = time.monotonic() + 10
    while data.count(b"HTTP/1.1 ") < 2 and time.monotonic() < deadline:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    check("ws_upgrade_declined_stays_http", data.startswith(b"HTTP/1.1 200") and b"plain\n" in data
          and data.count(b"HTTP/1.1 200") == 2 and b"101" not in data.split(b"\r\n")[0], repr(data[:300]))


def frame(payload, opcode=1):
    mask = os.urandom(4)
    head = bytes([0x80 | opcode])
    n = len(payload)
    head += bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def early_frame():
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
           "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n" % key).encode()
    s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    s.sendall(req + frame(b"early bird"))
    data = b""
    deadline = time.monotonic() + 10
    while b"early bird" not in data and time.monotonic() < deadline:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    check("ws_frame_sent_with_handshake_arrives", data.startswith(b"HTTP/1.1 101") and b"early bird" in data,
          repr(data[:300]))


async def tls():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    async with websockets.connect("wss://127.0.0.1:%d/echo" % PORT, ssl=ctx, ping_interval=None, max_size=None,
                                  open_timeout=10) as ws:
        blob = os.urandom(300000)
        await ws.send(blob)
        got = await asyncio.wait_for(ws.recv(), 20)
        check("ws_over_tls_client_echo", got == blob, "got %d bytes" % len(got or b""))


def stats(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/-/stats" % port, timeout=10) as f:
        return json.loads(f.read())


async def idle(n, stats_port):
    before = stats(stats_port)
    socks = []
    for i in range(n):
        ws = await connect("/echo")
        await ws.send("m%d" % i)
        await asyncio.wait_for(ws.recv(), 10)
        socks.append(ws)
    # An idle tunnel's handler parks after a whole worker tick of waiting (1 to 2 s), and
    # gives back its empty read buffer then: a tunnel quiet for less keeps it for the next
    # message.
    for _ in range(40):
        await asyncio.sleep(0.25)
        during = stats(stats_port)
        if during["parked_handlers"] >= n:
            break
    per = (during["heap_alloc_bytes"] - before["heap_alloc_bytes"]) / n
    check("ws_%d_idle_tunnels_parked" % n, during["conns"] >= n and during["parked_conns"] >= n - 1,
          "%d connections, %d parked" % (during["conns"], during["parked_conns"]))
    # A tunnel holding a read buffer would cost 16 KiB of heap each.
    check("ws_idle_tunnel_holds_no_buffer", per < 8192, "%.0f heap bytes per idle tunnel, %d handlers parked" %
          (per, during["parked_handlers"]))
    print("# %d idle tunnels: %.0f heap bytes each, %d parked of %d connections" %
          (n, per, during["parked_conns"], during["conns"]), flush=True)
    good = 0
    for i, ws in enumerate(socks):
        await ws.send("again %d" % i)
        if await asyncio.wait_for(ws.recv(), 10) == "again %d" % i:
            good += 1
    check("ws_idle_tunnels_carry_on", good == n, "%d of %d answered" % (good, n))
    await asyncio.gather(*(ws.close() for ws in socks))


async def timeout(seconds):
    async with connect("/echo") as ws:
        await ws.send("x")
        await asyncio.wait_for(ws.recv(), 10)
        start = time.monotonic()
        try:
            await asyncio.wait_for(ws.recv(), seconds + 10)
            check("ws_silent_tunnel_closed_after_read_timeout", False, "a message came")
        except websockets.ConnectionClosed:
            took = time.monotonic() - start
            check("ws_silent_tunnel_closed_after_read_timeout", seconds - 0.5 <= took < seconds + 8,
                  "closed after %.1f s" % took)


case = sys.argv[2]
runs = {"basic": lambda: asyncio.run(basic()), "early-frame": early_frame, "tls": lambda: asyncio.run(tls()),
        "idle": lambda: asyncio.run(idle(int(sys.argv[3]), int(sys.argv[4]))),
        "timeout": lambda: asyncio.run(timeout(float(sys.argv[3])))}
try:
    runs[case]()
except Exception as e:          # a case that cannot go on is a failure, not silence
    check("ws_%s_ran_through" % case.replace("-", "_"), False, "%s: %s" % (type(e).__name__, e))
