/* cg_malloc.c: the malloc and free fast paths, for instruction counting
 * under valgrind --tool=callgrind (bench/callgrind.sh).  Not timed.
 *
 *   cg_malloc N      N rounds of 256 malloc (16, 32, 48 or 64 bytes), then
 *                    256 free in the same order
 *
 * Run with the allocator under test preloaded (or none: the C library's).
 * callgrind.py counts the instructions of malloc and free that most calls
 * run.  Prints a RESULT line with check=ok when the objects held what was
 * written into them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BATCH 256

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 10000;
    static uint64_t *obj[BATCH];
    uint64_t bad = 0;
    for (long r = 0; r < rounds; r++) {
        for (int i = 0; i < BATCH; i++) {
            obj[i] = malloc(16 + 16 * (size_t)(i % 4));
            if (!obj[i])
                return 1;
            obj[i][0] = (uint64_t)r * BATCH + (uint64_t)i;
        }
        for (int i = 0; i < BATCH; i++) {
            bad += obj[i][0] != (uint64_t)r * BATCH + (uint64_t)i;
            free(obj[i]);
        }
    }
    printf("RESULT workload=cg_malloc rounds=%ld check=%s\n", rounds, bad ? "bad" : "ok");
    return bad != 0;
}
