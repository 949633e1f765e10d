/* Buffer growth (Go's growslice, nextslicecap in runtime/slice.go): how much capacity a growable
 * buffer takes when it must grow.
 *
 * Doubling while small keeps appends cheap; above 256 elements the factor eases from 2
 * toward 1.25 (newcap += (newcap + 3*256) / 4), so a large buffer does not leave up to
 * half its memory unused.  The result is then rounded up to what the allocator would
 * hand out anyway (a size class or whole pages), so the slack is usable capacity rather
 * than waste. */
#include "internal.h"

#define GROWTH_THRESHOLD 256

size_t sc_grow_cap(size_t old_cap, size_t needed, size_t elem_size)
{
    if (elem_size == 0)
        return needed;
    size_t cap = old_cap;
    if (cap > SIZE_MAX / 2 || needed > cap * 2) {
        cap = needed;
    } else if (cap < GROWTH_THRESHOLD) {
        cap = cap * 2;
    } else {
        while (cap < needed) {
            size_t step = (cap + 3 * GROWTH_THRESHOLD) / 4;
            if (cap > SIZE_MAX - step)
                return needed;
            cap += step;
        }
    }
    if (cap < needed)
        cap = needed;
    size_t bytes;
    if (__builtin_mul_overflow(cap, elem_size, &bytes))
        return cap;
    return sc_roundup(bytes) / elem_size;
}
