#!/usr/bin/python3
"""A WebSocket upstream for tests/e2e_proxy_websocket.sh, on python3-websockets (its own
server, its own handshake and framing):

  /echo      every message back as it came (text or binary); subprotocol "chat" if offered
  /headers   one text message: the request's fields as JSON, then waits for the close
  /close     closes at once with code 4001, reason "bye"
  /push      a text message every 50 ms, 20 of them, then a normal close
  /reject    no upgrade: an HTTP 403
  /plain     no upgrade: an HTTP 200 with a short body

Usage: upstream_websocket.py PORT
"""
import asyncio
import http
import json
import logging
import sys

import websockets


async def handler(ws, path=None):
    path = ws.path.split("?")[0]
    if path == "/echo":
        async for msg in ws:
            await ws.send(msg)
    elif path == "/headers":
        await ws.send(json.dumps({k.lower(): v for k, v in ws.request_headers.raw_items()}))
        await ws.wait_closed()
    elif path == "/close":
        await ws.close(4001, "bye")
    elif path == "/push":
        for i in range(20):
            await ws.send("push %d" % i)
            await asyncio.sleep(0.05)
        await ws.close()


async def process_request(path, headers):
    path = path.split("?")[0]
    if path == "/reject":
        return http.HTTPStatus.FORBIDDEN, [("Content-Type", "text/plain")], b"no websocket here\n"
    if path == "/plain":
        return http.HTTPStatus.OK, [("Content-Type", "text/plain")], b"plain\n"
    return None


async def main(port):
    logging.getLogger("websockets").setLevel(logging.CRITICAL)   # a client's abrupt end is a test's, not news
    async with websockets.serve(handler, "127.0.0.1", port, process_request=process_request,
                                subprotocols=["chat"], max_size=None, ping_interval=None):
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
