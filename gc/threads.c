/* threads.c: the allocation lock, thread caches, and stacks.
 *
 * Each thread that allocates gets a thread_cache of free lists (the fast
 * path pops them with no lock).  Caches live in memory the collector does
 * not scan: free slots must not be roots.  A collection empties them all.
 *
 * This file scans the stack of the thread that collects; stopping and
 * scanning other threads is the subject of the threads work.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

pthread_mutex_t gc_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;

struct cache_rec {
    struct thread_cache cache;
    struct cache_rec *next_all;     /* every cache record                  */
    struct cache_rec *next_free;    /* records of exited threads           */
    bool in_use;
};

static struct cache_rec *all_caches;
static struct cache_rec *free_caches;
static pthread_key_t cache_key;

extern void *__libc_stack_end;
static uintptr_t main_stack_bottom;
static pthread_t main_thread;

static void cache_release(void *arg)
{
    struct cache_rec *rec = arg;
    tl_cache = &empty_cache;
    lock();
    /* Slots still on its lists are unreachable: the next collection
     * reclaims them. */
    memset(&rec->cache, 0, sizeof rec->cache);
    rec->in_use = false;
    rec->next_free = free_caches;
    free_caches = rec;
    unlock();
}

void threads_init(void)
{
    main_stack_bottom = (uintptr_t)__libc_stack_end;
    main_thread = pthread_self();
    pthread_key_create(&cache_key, cache_release);
}

struct thread_cache *thread_cache_create(void)
{
    lock();
    struct cache_rec *rec = free_caches;
    if (rec) {
        free_caches = rec->next_free;
    } else {
        rec = mmap(NULL, sizeof *rec, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (rec == MAP_FAILED) {
            unlock();
            return NULL;
        }
        rec->next_all = all_caches;
        all_caches = rec;
    }
    rec->in_use = true;
    unlock();
    pthread_setspecific(cache_key, rec);
    tl_cache = &rec->cache;
    return &rec->cache;
}

void thread_caches_clear(void)
{
    for (struct cache_rec *rec = all_caches; rec; rec = rec->next_all)
        memset(&rec->cache, 0, sizeof rec->cache);
}

static uintptr_t current_stack_bottom(void)
{
    if (pthread_equal(pthread_self(), main_thread) || !main_thread)
        return main_stack_bottom;
    pthread_attr_t attr;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return main_stack_bottom;
    pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    return (uintptr_t)addr + size;
}

static size_t last_stacks_bytes;

size_t stacks_size(void)
{
    return last_stacks_bytes;
}

/* Scan from a local of this frame, which lies below the registers that
 * the caller saved, to the bottom of the stack. */
static void __attribute__((noinline)) scan_stack_from_here(uintptr_t bottom)
{
    volatile uintptr_t here = 0;
    uintptr_t top = (uintptr_t)&here;
    mark_range((void *)top, (void *)bottom);
    last_stacks_bytes = bottom - top;
}

/* Spill every callee-saved register into this frame, so that a pointer
 * held only in a register is seen on the stack. */
static void __attribute__((noinline)) scan_own_stack(void)
{
    __builtin_unwind_init();
    scan_stack_from_here(current_stack_bottom());
    __asm__ volatile("" ::: "memory");   /* no tail call: keep this frame */
}

void stacks_mark(void)
{
    scan_own_stack();
}
