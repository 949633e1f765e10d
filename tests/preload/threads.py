# A threaded python3 job for the drop-in's tests and benchmarks: four threads each build
# dicts of records, serialise them to JSON and parse them back, keep every other round's
# result for a while and drop the rest, so that objects of every small size are made and
# freed by four threads at once (the interpreter's lock hands the threads over every few
# ms, and an object may be freed by a thread other than its maker's when results are
# dropped).  Prints one digest per thread, which must not depend on the allocator.
# Usage: python3 threads.py [ROUNDS] (4: the benchmark's; the tests run 1)
import hashlib, json, sys, threading

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
NTHREADS = 4
kept = []                       # results shared between threads, dropped by whoever comes next
kept_lock = threading.Lock()
digests = [None] * NTHREADS


def work(t):
    h = hashlib.sha256()
    for rnd in range(rounds):
        n = 20000 + 5000 * ((t + rnd) % 4)
        d = {"k%d-%d-%d" % (t, rnd, i): {"id": i, "name": "n" * (i % 23), "tags": ["t%d" % (i % 7)] * (i % 4),
                                        "score": i * 0.5} for i in range(n)}
        blob = json.dumps(d, sort_keys=True)
        back = json.loads(blob)
        h.update(blob[:: 101].encode())
        h.update(repr((len(back), sum(v["id"] for v in back.values()))).encode())
        with kept_lock:
            if rnd % 2 == 0:
                kept.append(back)
            if len(kept) > NTHREADS:
                kept.pop(0)
        del d, blob, back
    digests[t] = h.hexdigest()


threads = [threading.Thread(target=work, args=(t,)) for t in range(NTHREADS)]
for th in threads:
    th.start()
for th in threads:
    th.join()
for t, dg in enumerate(digests):
    print("thread", t, dg)
