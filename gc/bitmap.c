/* bitmap.c: operations on ranges of bits, written once for the mark and
 * allocation bitmaps (one bit per slot, index slot number - q0) and the
 * verifier's scratch maps.  Each walks the range a word at a time.  They
 * are in malloc's group of code (LF_MALLOC_TEXT): malloc's span code and
 * its assertions call them. */
#include "internal.h"

/* The bits of word w that lie in [from, to), which overlaps it. */
static inline uint64_t range_mask(uint64_t w, uint64_t from, uint64_t to)
{
    uint64_t m = ~0ull;
    if (w == from >> 6)
        m &= ~0ull << (from & 63);
    if (w == (to - 1) >> 6 && (to & 63))
        m &= ~(~0ull << (to & 63));
    return m;
}

LF_MALLOC_TEXT bool lf_bits_any(const uint64_t *bits, uint64_t from, uint64_t to)
{
    if (from >= to)
        return false;
    for (uint64_t w = from >> 6; w <= (to - 1) >> 6; w++)
        if (bits[w] & range_mask(w, from, to))
            return true;
    return false;
}

LF_MALLOC_TEXT bool lf_bits_all(const uint64_t *bits, uint64_t from, uint64_t to)
{
    if (from >= to)
        return true;
    for (uint64_t w = from >> 6; w <= (to - 1) >> 6; w++) {
        uint64_t m = range_mask(w, from, to);
        if ((bits[w] & m) != m)
            return false;
    }
    return true;
}

/* The popcnt instruction (every x86_64 CPU since 2008) rather than
 * libgcc's bit-twiddling call: this runs over the whole bitmap after
 * every collection. */
__attribute__((target("popcnt")))
LF_MALLOC_TEXT size_t lf_bits_count(const uint64_t *bits, uint64_t from, uint64_t to)
{
    size_t n = 0;
    if (from >= to)
        return 0;
    for (uint64_t w = from >> 6; w <= (to - 1) >> 6; w++)
        n += (size_t)__builtin_popcountll(bits[w] & range_mask(w, from, to));
    return n;
}

LF_MALLOC_TEXT void lf_bits_clear(uint64_t *bits, uint64_t from, uint64_t to)
{
    if (from >= to)
        return;
    for (uint64_t w = from >> 6; w <= (to - 1) >> 6; w++)
        bits[w] &= ~range_mask(w, from, to);
}
