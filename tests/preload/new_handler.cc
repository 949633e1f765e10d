// C++'s new_handler through every form of operator new, for tests/e2e_preload.sh: run as it
// is (libstdc++'s operators on glibc) and under the drop-in (which defines the operators
// itself), the output must be the same.  A request nobody can satisfy calls the installed
// handler until it gives up; the throwing forms then throw std::bad_alloc, the nothrow
// forms return null - also when the handler itself throws std::bad_alloc, which the
// standard allows it to ([new.handler]; [new.delete.single]: a nothrow form "calls
// operator new(size)... if the call returns normally, returns the result, otherwise
// returns a null pointer").
#include <cstdint>
#include <cstdio>
#include <new>

static int calls;
static int limit;
static bool throws;

static void handler()
{
    ++calls;
    if (throws)
        throw std::bad_alloc();
    if (calls >= limit)
        std::set_new_handler(nullptr);
}

static const std::size_t huge = SIZE_MAX / 4;
static const std::align_val_t al{ 64 };

template <typename F> static void run(const char *name, F f)
{
    for (int t = 0; t < 2; t++) {
        calls = 0;
        limit = 3;
        throws = t;
        std::set_new_handler(handler);
        const char *how;
        try {
            how = f() ? "a pointer" : "null";
        } catch (const std::bad_alloc &) {
            how = "std::bad_alloc";
        }
        std::set_new_handler(nullptr);
        std::printf("%-26s handler %s: %s after %d handler call(s)\n", name, throws ? "throws" : "gives up", how, calls);
    }
}

int main()
{
    run("new", [] { return ::operator new(huge); });
    run("new[]", [] { return ::operator new[](huge); });
    run("new(align)", [] { return ::operator new(huge, al); });
    run("new[](align)", [] { return ::operator new[](huge, al); });
    run("new(nothrow)", [] { return ::operator new(huge, std::nothrow); });
    run("new[](nothrow)", [] { return ::operator new[](huge, std::nothrow); });
    run("new(align, nothrow)", [] { return ::operator new(huge, al, std::nothrow); });
    run("new[](align, nothrow)", [] { return ::operator new[](huge, al, std::nothrow); });
    // And a request that can be met, with a handler installed: no call.
    calls = 0;
    std::set_new_handler(handler);
    void *p = ::operator new(100, std::nothrow), *q = ::operator new(100, al, std::nothrow);
    std::printf("small nothrow: %s, %d handler call(s)\n", p && q ? "pointers" : "null", calls);
    ::operator delete(p);
    ::operator delete(q, al);
    return 0;
}
