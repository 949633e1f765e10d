/* sc-classes: prints the size-class table the library was built with, in the columns of
 * tests/data/sizeclasses.tsv, or (--config) how the library was built. */
#include <stdio.h>
#include <string.h>

#include "scalloc.h"
#include "sc_sizeclasses.h"

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--config")) {
        struct sc_config c;
        sc_get_config(&c);
        printf("size_specialized\t%s\n", c.size_specialized ? "on" : "off");
        printf("page_size\t%zu\n", c.page_size);
        printf("arena_bytes\t%zu\n", c.arena_bytes);
        printf("grow_bytes\t%zu\n", c.grow_bytes);
        printf("release\t%s\n", c.release_method);
        printf("decay_ms\t%d\n", c.decay_ms);
        printf("retain_pct\t%u\n", c.retain_pct);
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: sc-classes [--config]\n");
        return 2;
    }
    printf("class\tbytes_per_obj\tbytes_per_span\tobjects\ttail_waste\tmax_waste_pct\tmin_align\n");
    for (int c = 1; c < SC_NCLASS; c++) {
        unsigned size = sc_class_size[c], span = sc_class_npages[c] * SC_PAGE_SIZE;
        unsigned objects = span / size, tail = span % size, prev = sc_class_size[c - 1];
        double waste = 100.0 * ((double)(size - prev - 1) * objects + tail) / span;
        unsigned align = size & -size;
        if (align > SC_PAGE_SIZE)
            align = SC_PAGE_SIZE;
        printf("%d\t%u\t%u\t%u\t%u\t%.2f\t%u\n", c, size, span, objects, tail, waste, align);
    }
    return 0;
}
