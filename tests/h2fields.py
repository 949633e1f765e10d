#!/usr/bin/python3
"""How h2park's response fields come out of HPACK (RFC 7541): makes two requests on one
HTTP/2 connection and prints, as one line of key=value words, how many entries the
response fields left in the client's dynamic table after each response, the size of each
header block, and which fields were sent never-indexed.

    tests/h2fields.py PORT [PATH]
"""
import socket
import sys

from hpack import Decoder, Encoder
from hpack.struct import NeverIndexedHeaderTuple

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HEADERS, SETTINGS, END_STREAM, END_HEADERS, ACK = 1, 4, 1, 4, 1


def frame(ftype, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


def main():
    port, path = int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "/-/healthz"
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    enc, dec = Encoder(), Decoder()
    req = [(":method", "GET"), (":scheme", "http"), (":path", path), (":authority", "localhost")]
    sock.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, enc.encode(req)))
    blocks, buf, sent_second = {}, b"", False
    while len(blocks) < 2:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
            n = int.from_bytes(buf[:3], "big")
            ftype, flags, sid, payload = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF, buf[9:9 + n]
            buf = buf[9 + n:]
            if ftype == SETTINGS and not flags & ACK:
                sock.sendall(frame(SETTINGS, ACK, 0))
            if ftype == HEADERS:
                blocks[sid] = payload
                if not sent_second:      # the second only once the first is decoded in order
                    sent_second = True
                    sock.sendall(frame(HEADERS, END_STREAM | END_HEADERS, 3, enc.encode(req)))
    first, second = dec.decode(blocks[1], raw=True), None
    table_after_first = len(dec.header_table.dynamic_entries)
    second = dec.decode(blocks[3], raw=True)
    never = sorted({h[0].decode() for h in first + second if isinstance(h, NeverIndexedHeaderTuple)})
    print("entries=%d/%d bytes=%d/%d never=%s" % (table_after_first, len(dec.header_table.dynamic_entries),
                                                  len(blocks[1]), len(blocks[3]), ",".join(never) or "-"))


if __name__ == "__main__":
    main()
