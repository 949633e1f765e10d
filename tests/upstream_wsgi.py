"""A WSGI upstream for tests/e2e_proxy_peers.sh, served by gunicorn (its own HTTP/1.1 server):

  /hello     "hello from gunicorn", with a Content-Length
  /stream    five lines from a generator, no length: gunicorn sends them chunked
  /upload    the request body's length and sha256
  /headers   the request's fields as gunicorn passes them (HTTP_*), one per line, sorted

Run: gunicorn --bind 127.0.0.1:PORT --chdir tests upstream_wsgi:app
"""
import hashlib


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/hello":
        body = b"hello from gunicorn\n"
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]
    if path == "/stream":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return (b"line %d\n" % i for i in range(5))
    if path == "/upload":
        h, n, stream = hashlib.sha256(), 0, environ["wsgi.input"]
        while True:
            piece = stream.read(65536)
            if not piece:
                break
            h.update(piece)
            n += len(piece)
        body = b"%d %s\n" % (n, h.hexdigest().encode())
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]
    if path == "/headers":
        lines = sorted("%s: %s" % (k[5:].lower().replace("_", "-"), v) for k, v in environ.items() if k.startswith("HTTP_"))
        body = ("\n".join(lines) + "\n").encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]
    start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "10")])
    return [b"not found\n"]
