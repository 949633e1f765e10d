/* A program that uses scalloc as an outside project would: built by tests/e2e_install.sh
 * against an installed copy, with nothing but what pkg-config says.  It checks that the
 * header and the library agree on how the library was built (the size-specialized entry
 * points exist exactly when sc_config.h says so) and that the heap works. */
#include <stdio.h>
#include <string.h>

#include <scalloc.h>

int main(void)
{
    struct sc_config cfg;
    sc_get_config(&cfg);
    if (cfg.size_specialized != SC_SIZE_SPECIALIZED) {
        printf("FAIL header says size_specialized=%d, library %d\n", SC_SIZE_SPECIALIZED, cfg.size_specialized);
        return 1;
    }
    struct sc_stats before, after;
    sc_read_stats(&before);
    char *small = sc_malloc(24);              /* a constant: the specialized entry point */
    char *big = sc_malloc(100000);
    memset(small, 1, 24);
    memset(big, 2, 100000);
    sc_read_stats(&after);
    int ok = small && big && sc_usable_size(small) == 24 && after.mallocs - before.mallocs == 2 &&
             after.heap_alloc - before.heap_alloc == 24 + 106496;
    sc_free(small);
    sc_free(big);
    printf("%s scalloc_user: size_specialized=%d\n", ok ? "ok" : "FAIL", cfg.size_specialized);
    return !ok;
}
