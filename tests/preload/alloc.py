# An allocation-heavy python3 program for the drop-in's tests and benchmarks: strings,
# dicts, lists, tuples, sets, JSON, regular expressions and sorting, objects of every size
# from a few bytes to megabytes, half freed along the way.  Prints digests of what it
# built, which must not depend on the allocator.  Usage: python3 alloc.py [SCALE]
import hashlib, json, re, sys

scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1
h = hashlib.sha256()
for rnd in range(scale):
    words = ["w%d-%s" % (i, "x" * (i % 37)) for i in range(120000)]
    d = {w: (i, w[::-1], [i] * (i % 5)) for i, w in enumerate(words)}
    for i in range(0, len(words), 2):
        del d[words[i]]
    s = set(w[: 3 + i % 9] for i, w in enumerate(words))
    blob = json.dumps(sorted(d.items())[:40000])
    back = json.loads(blob)
    pat = re.compile(r"w(\d+)-(x*)")
    total = sum(int(m.group(1)) + len(m.group(2)) for m in pat.finditer(" ".join(words[::3])))
    big = [bytearray(b"%d" % i) * (1 + i % 300) for i in range(3000)]
    big.sort(key=len)
    chunks = [("%x" % i).encode() * (i % 50) for i in range(50000)]
    joined = b"".join(chunks)
    h.update(blob.encode())
    h.update(repr((len(d), len(s), len(back), total, sum(map(len, big)), len(joined))).encode())
    h.update(joined[::97])
    del words, d, s, blob, back, big, chunks, joined
print("digest", h.hexdigest())
