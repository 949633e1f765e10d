# fork under threads, for the drop-in's tests: four threads build and drop dicts and JSON
# while the main thread forks ROUNDS children; each child, holding whatever the parent's
# threads left half-done in the allocator, allocates (a dict, a JSON round trip), writes a
# digest to a pipe and exits.  Prints the children's digests (which depend on the child's
# number only) and the threads' work, so the output must not depend on the allocator.
# Usage: python3 fork_threads.py [ROUNDS]
import hashlib, json, os, sys, threading

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
stop = threading.Event()
done = [0] * 4


def churn(t):
    while not stop.is_set():
        d = {"k%d-%d" % (t, i): [i, "v" * (i % 17)] for i in range(2000)}
        json.loads(json.dumps(d))
        done[t] += 1


def child(k):
    d = {"c%d-%d" % (k, i): {"n": i, "s": "x" * (i % 11)} for i in range(3000)}
    return hashlib.sha256(json.dumps(json.loads(json.dumps(d)), sort_keys=True).encode()).hexdigest()[:16]


threads = [threading.Thread(target=churn, args=(t,)) for t in range(4)]
for th in threads:
    th.start()
while min(done) == 0:          # every thread inside its work before the first fork
    pass
digests = []
for k in range(rounds):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, child(k).encode())
        os._exit(0)
    os.close(w)
    got = os.read(r, 64).decode()
    os.close(r)
    _, status = os.waitpid(pid, 0)
    digests.append("%d %s %d" % (k, got, os.waitstatus_to_exitcode(status)))
stop.set()
for th in threads:
    th.join()
print("\n".join(digests))
print("threads worked:", all(n > 0 for n in done))
