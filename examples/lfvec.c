/* lfvec.c: low-fat vectors (lfvec.h) at work.
 *
 * Builds a vector of the first 100,000 squares one push at a time, then
 * reads its length, capacity and items back from nothing but the pointer,
 * pops a few, and compares what 100,000 vectors of 3 items cost with what
 * the usual {data, length, capacity} vectors cost.  Exits 0 when all is
 * right.
 */
#include "lfvec.h"
#include <stdio.h>

int main(void)
{
    enum { N = 100000 };
    lfvec v = lfvec_new(0);
    if (v == NULL || !lowfat_is_heap_ptr(v)) {
        fprintf(stderr, "lfvec: malloc did not return a low-fat pointer: "
                "link lfgc's malloc\n");
        return 1;
    }
    int ok = 1;
    for (long i = 0; i < N; i++) {
        if (lfvec_push(&v, i * i) != 0)
            return 1;
        ok &= lfvec_len(v) == (size_t)i + 1;
        ok &= lfvec_capacity(v) >= lfvec_len(v);
    }
    long sum = 0;
    for (size_t i = 0; i < lfvec_len(v); i++)
        sum += lfvec_at(v, i) - (long)i * (long)i;
    ok &= sum == 0;
    for (long i = N - 1; i >= N - 10; i--)
        ok &= lfvec_pop(&v) == i * i;
    ok &= lfvec_len(v) == N - 10;
    printf("vector: %zu items, capacity %zu, %zu bytes, all from one "
           "pointer; %s\n", lfvec_len(v), lfvec_capacity(v),
           lowfat_size(v), ok ? "items right" : "FAILED");
    lfvec_free(v);

    /* Small vectors: a fat vector is a 3-word header plus its array. */
    size_t fat = 0, lean = 0;
    for (int i = 0; i < 1000; i++) {
        lfvec s = lfvec_new(3);
        for (long k = 0; k < 3; k++)
            lfvec_push(&s, k);
        lean += lowfat_size(s);
        long *a = malloc(3 * sizeof(long));
        void *h = malloc(3 * sizeof(void *));
        fat += lowfat_size(a) + lowfat_size(h);
        free(a);
        free(h);
        lfvec_free(s);
    }
    printf("3-item vectors: %zu bytes each low-fat, %zu fat\n", lean / 1000,
           fat / 1000);
    return ok ? 0 : 1;
}
