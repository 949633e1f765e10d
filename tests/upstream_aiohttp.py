#!/usr/bin/python3
"""An application upstream on aiohttp's HTTP/1.1 server, for tests/e2e_reverse_proxy.sh.

usage: upstream_aiohttp.py PORT

  POST /echo        streams the request body back as it reads it (chunked response)
  GET  /headers     the request's header fields, one "name: value" per line
  GET  /sse         server-sent events: "data: 1" now, then "data: released" once /release
                    is asked (or "data: unreleased" after 20 s without), then the end - a
                    proxy that held the first back until the end never sees it released
  GET  /longpoll    answers after ?s=SECONDS, or once /release is asked (?s=0: no limit)
  GET  /release     answers every long poll waiting for it, and releases /sse
"""
import asyncio
import sys

from aiohttp import web


async def echo(request):
    resp = web.StreamResponse()
    resp.content_type = "application/octet-stream"
    await resp.prepare(request)
    async for chunk in request.content.iter_any():
        await resp.write(chunk)
    await resp.write_eof()
    return resp


async def headers(request):
    text = "".join("%s: %s\n" % (k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in request.raw_headers)
    return web.Response(text=text)


released = asyncio.Event()


async def sse(request):
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    await resp.write(b"data: 1\n\n")
    try:
        await asyncio.wait_for(released.wait(), timeout=20)
        await resp.write(b"data: released\n\n")
    except asyncio.TimeoutError:
        await resp.write(b"data: unreleased\n\n")
    await resp.write_eof()
    return resp


async def longpoll(request):
    s = float(request.query.get("s", "1"))
    try:
        await asyncio.wait_for(released.wait(), timeout=s if s > 0 else None)
    except asyncio.TimeoutError:
        pass
    return web.Response(text="done\n")


async def release(request):
    released.set()
    released.clear()
    return web.Response(text="released\n")


app = web.Application(client_max_size=1 << 30)
app.router.add_post("/echo", echo)
app.router.add_get("/headers", headers)
app.router.add_get("/sse", sse)
app.router.add_get("/longpoll", longpoll)
app.router.add_get("/release", release)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
