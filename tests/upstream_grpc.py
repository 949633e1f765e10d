#!/usr/bin/python3
"""A gRPC server (python3-grpcio) for the HTTP/2 proxy tests, and its client.

  upstream_grpc.py serve PORT [CERT KEY]     (with CERT and KEY: over TLS)
  upstream_grpc.py call ADDR unary|fail|stream|bidi|pingpong [N]
                 (pingpong: a bidi call whose next message goes only once the answer to
                 the last one came - a proxy that gathered the stream would deadlock it,
                 to the call's 30 s deadline)

Methods are registered generically (no generated code): bytes in, bytes out.
  /t.T/Echo      unary: the request back, prefixed "echo:"; metadata "x-seen-te" says
                 whether te: trailers arrived
  /t.T/Fail      unary: fails with NOT_FOUND "no such thing" before any message
                 (a trailers-only response: grpc-status in the head)
  /t.T/Bidi      stream-stream: each message back as it comes, then trailing metadata
                 x-count (how many), grpc-status 0
  /t.T/Count     stream-unary: total bytes of the messages
The client prints one line per result, as the tests read them."""
import queue, sys, time
import grpc
from concurrent import futures

ident = lambda b: b

def echo(req, ctx):
    md = dict(ctx.invocation_metadata())
    ctx.set_trailing_metadata((("x-trailer", "unary-done"),))
    return b"echo:" + req

def fail(req, ctx):
    ctx.abort(grpc.StatusCode.NOT_FOUND, "no such thing")

def bidi(it, ctx):
    n = 0
    for m in it:
        n += 1
        yield b"back:" + m
    ctx.set_trailing_metadata((("x-count", str(n)),))

def count(it, ctx):
    return str(sum(len(m) for m in it)).encode()

def serve(port, cert=None, key=None):
    # Without SO_REUSEPORT (grpcio's default sets it), so that a port another server holds
    # is a failure here, never a port shared with it.
    s = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=[("grpc.so_reuseport", 0)])
    h = grpc.method_handlers_generic_handler("t.T", {
        "Echo": grpc.unary_unary_rpc_method_handler(echo, ident, ident),
        "Fail": grpc.unary_unary_rpc_method_handler(fail, ident, ident),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi, ident, ident),
        "Count": grpc.stream_unary_rpc_method_handler(count, ident, ident),
    })
    s.add_generic_rpc_handlers((h,))
    if cert:
        creds = grpc.ssl_server_credentials([(open(key, "rb").read(), open(cert, "rb").read())])
        bound = s.add_secure_port("127.0.0.1:%d" % port, creds)
    else:
        bound = s.add_insecure_port("127.0.0.1:%d" % port)
    if bound != port:
        sys.exit("upstream_grpc: cannot listen on port %d" % port)
    s.start()
    s.wait_for_termination()

def call(addr, what, n):
    t0 = time.time()
    ch = grpc.insecure_channel(addr)
    try:
        if what == "unary":
            f = ch.unary_unary("/t.T/Echo", ident, ident)
            resp, c = f.with_call(b"x" * n, timeout=30)
            print("unary", resp[:20].decode(), len(resp), c.code().name, dict(c.trailing_metadata()).get("x-trailer"))
        elif what == "fail":
            f = ch.unary_unary("/t.T/Fail", ident, ident)
            try:
                f(b"hi", timeout=10)
                print("fail no-error")
            except grpc.RpcError as e:
                print("fail", e.code().name, e.details())
        elif what in ("bidi", "pingpong"):
            f = ch.stream_stream("/t.T/Bidi", ident, ident)
            sent = []
            answered = queue.Queue()
            def gen():
                for i in range(n):
                    m = ("m%d-" % i).encode() + b"y" * (i * 997 % 70000)
                    sent.append(m)
                    yield m
                    if what == "pingpong":
                        answered.get()
            call = f(gen(), timeout=30)
            got = []
            times = []
            for r in call:
                got.append(r)
                times.append(time.time())
                answered.put(None)
            ok = got == [b"back:" + m for m in sent]
            # interleaved: the first answer came before the last message was sent
            spread = times[-1] - times[0] if times else 0
            print("bidi", len(got), "match" if ok else "mismatch", call.code().name,
                  dict(call.trailing_metadata()).get("x-count"), "spread=%.2f" % spread)
        elif what == "count":
            f = ch.stream_unary("/t.T/Count", ident, ident)
            r = f(iter([b"z" * 65536] * n), timeout=30)
            print("count", r.decode())
    except grpc.RpcError as e:
        print(what, "error", e.code().name, e.details(), "after %.1f s" % (time.time() - t0))
    finally:
        ch.close()

if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), *sys.argv[3:5])
    else:
        call(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 10)
