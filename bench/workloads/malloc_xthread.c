/* malloc_xthread.c: producer/consumer across threads (cross-thread free).
 *
 *   malloc_xthread [pairs] [millions]   (default 1 pair, 10 million objects)
 *
 * Each pair is a producer thread that allocates objects of 16..512 bytes,
 * tags them and passes them in batches of 256 through a small ring (a mutex
 * and two condition variables) to its consumer thread, which checks and
 * frees every one of them: every free is of memory another thread
 * allocated, the case thread-caching allocators must handle without a lock
 * of their own on the common path.  The ring holds 8 batches, so the
 * producer keeps allocating while the consumer frees.
 *
 * Extra RESULT fields: objects, ns_per_object (wall time / objects).
 */
#include "malloc_util.h"
#include <pthread.h>

#define BATCH 256
#define RING 8

struct batch {
    void *obj[BATCH];
    uint32_t size[BATCH];
};

struct pair {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    struct batch *ring[RING];
    unsigned head, tail;               /* head - tail batches queued */
    long objects;                      /* to produce */
    uint64_t seed;
    uint64_t bad;                      /* found by the consumer */
    pthread_t prod, cons;
};

static void put(struct pair *q, struct batch *b)
{
    pthread_mutex_lock(&q->lock);
    while (q->head - q->tail == RING)
        pthread_cond_wait(&q->not_full, &q->lock);
    q->ring[q->head++ % RING] = b;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}

static struct batch *get(struct pair *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->head == q->tail)
        pthread_cond_wait(&q->not_empty, &q->lock);
    struct batch *b = q->ring[q->tail++ % RING];
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->lock);
    return b;
}

static uint64_t tag_of(const void *p, uint32_t size)
{
    return (uint64_t)(uintptr_t)p * 31 + size;
}

static void *producer(void *arg)
{
    struct pair *q = arg;
    uint64_t st = q->seed;
    long left = q->objects;
    while (left > 0) {
        /* The batch itself is allocated here and freed by the consumer:
         * a larger cross-thread object now and then. */
        struct batch *b = mb_xmalloc(sizeof *b);
        int n = left < BATCH ? (int)left : BATCH;
        for (int i = 0; i < BATCH; i++) {
            if (i >= n) {
                b->obj[i] = NULL;
                continue;
            }
            uint32_t size = (uint32_t)mb_log_size(&st, 16, 512);
            void *p = mb_xmalloc(size);
            mb_fill(p, size, tag_of(p, size));
            b->obj[i] = p;
            b->size[i] = size;
        }
        left -= n;
        put(q, b);
    }
    put(q, NULL);
    return NULL;
}

static void *consumer(void *arg)
{
    struct pair *q = arg;
    struct batch *b;
    while ((b = get(q)) != NULL) {
        for (int i = 0; i < BATCH && b->obj[i]; i++) {
            if (!mb_check(b->obj[i], b->size[i], tag_of(b->obj[i], b->size[i])))
                q->bad++;
            free(b->obj[i]);
        }
        free(b);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int pairs = argc > 1 ? atoi(argv[1]) : 1;
    double millions = argc > 2 ? atof(argv[2]) : 10;
    if (pairs < 1 || pairs > 64)
        pairs = 1;
    long objects = (long)(millions * 1e6);
    if (objects < 10000)
        objects = 10000;
    mb_init();
    struct pair *q = calloc((size_t)pairs, sizeof *q);
    if (!q)
        return 3;
    for (int i = 0; i < pairs; i++) {
        pthread_mutex_init(&q[i].lock, NULL);
        pthread_cond_init(&q[i].not_empty, NULL);
        pthread_cond_init(&q[i].not_full, NULL);
        q[i].objects = objects / pairs;
        q[i].seed = 0x853C49E6748FEA9BULL + (uint64_t)i;
        if (pthread_create(&q[i].cons, NULL, consumer, &q[i]) ||
            pthread_create(&q[i].prod, NULL, producer, &q[i])) {
            fprintf(stderr, "malloc_xthread: pthread_create failed\n");
            return 3;
        }
    }
    uint64_t bad = 0;
    long done = 0;
    for (int i = 0; i < pairs; i++) {
        pthread_join(q[i].prod, NULL);
        pthread_join(q[i].cons, NULL);
        bad += q[i].bad;
        done += q[i].objects;
    }
    free(q);
    if (bad)
        fprintf(stderr, "malloc_xthread: %llu objects damaged\n",
                (unsigned long long)bad);
    double wall = (double)(bench_now_ns() - mb_t0_ns);
    return mb_report("malloc_xthread", bad == 0,
                     "threads=%d objects=%ld ns_per_object=%.2f", 2 * pairs,
                     done, wall / (double)done);
}
