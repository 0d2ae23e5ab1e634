/* threads.c: the allocation lock, the thread registry, stopping the
 * world, and stacks.
 *
 * Every thread that allocates or holds heap pointers is registered: by
 * GC_pthread_create (GC_THREADS redirects pthread_create to it), by
 * GC_register_my_thread, or on its first allocation.  Each record holds
 * the thread's stack bounds and its cache of free lists (popped with no
 * lock), in memory the collector does not scan.
 *
 * A collection stops the other registered threads with a signal (SIGPWR by
 * default, as bdwgc; restarted by SIGXCPU).  The handler saves the
 * interrupted registers and stack pointer from its ucontext, posts a
 * semaphore and waits in sigsuspend for the restart signal; the handler is
 * installed with SA_RESTART so that interrupted system calls restart.
 * Threads inside GC_do_blocking are not signalled: their stacks are
 * scanned from where they entered it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stddef.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/single_threaded.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"

LF_UNSCANNED_DATA pthread_mutex_t lf_gc_lock = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;

enum thread_state { T_RUNNING, T_BLOCKING, T_FINISHED };

/* What GC_register_altstack says: a signal stack and the normal stack. */
struct alt_stacks {
    uintptr_t alt_lo, alt_hi;
    uintptr_t norm_lo, norm_hi;
};

struct thread_rec {
    struct thread_rec *next;        /* registry, or the spare list        */
    pthread_t id;
    uintptr_t stack_bottom;         /* highest address of the stack       */
    uintptr_t stack_lo;             /* lowest address it may reach; 0: not
                                       known (found at the next collection) */
    struct alt_stacks alt;          /* GC_register_altstack; zeros if none */
    volatile uintptr_t stack_sp;    /* lowest address to scan when stopped */
    uintptr_t blocking_sp;          /* saved by GC_do_blocking            */
    uintptr_t tls_lo, tls_hi;       /* static TLS the stack scan misses   */
    greg_t regs[NGREG];             /* registers when stopped             */
    void *retval;                   /* kept alive until joined            */
    uint64_t serial;                /* which registration uses the record */
    uint8_t state;
    uint8_t detached;
    uint8_t suspended;              /* stopped: its registers are saved */
    uint8_t ext_suspended;          /* by GC_suspend_thread, until resumed */
    uint8_t parked;                 /* in the suspend handler for it      */
    volatile uint8_t leaving_call;  /* in lf_unlock_to_caller            */
    volatile uint8_t stop_deferred; /* this stop: 1 its signal came while
                                       leaving_call, 2 sent again          */
    /* After the fields above, which every thread touches: see struct
     * thread_cache for the order. */
    struct thread_cache cache;
};
_Static_assert(sizeof(struct thread_rec) % 8 == 0, "rec_alloc clears a record word by word");
_Static_assert((offsetof(struct thread_rec, cache) + offsetof(struct thread_cache, k)) % 4096 == 0,
               "thread_cache.k must start a page of the record: adjust LF_CACHE_K_PAD");
_Static_assert(offsetof(struct thread_rec, cache) + offsetof(struct thread_cache, free_magic) +
                   8 * (FREE_MAGIC_OWN + NUM_SMALL_CLASSES) <= 8192,
               "malloc's part of a record must fit its first two pages");

/* The module's state.  Not scanned: it holds no heap pointers.  What
 * belongs to one thread is thread-local instead (tl_self and the tl_
 * variables below). */
static LF_UNSCANNED_DATA struct threads_state {
    /* The registry */
    struct thread_rec *registry;    /* registered threads, lock held       */
    struct thread_rec *spare_recs;  /* unregistered records, reused: a record
                                       is never unmapped, a stale handle to
                                       it stays readable                   */
    uint64_t rec_serial;            /* last registration number: tells a
                                       reused record's registrations apart */
    pthread_key_t exit_key;         /* its destructor unregisters a thread
                                       at exit                             */
    pthread_once_t exit_key_once;   /* the key is made as early as the
                                       library loads: keys below 32 live in
                                       the thread's own control block, and
                                       setting one allocates nothing       */
    bool allow_register;            /* GC_allow_register_threads was called */
    GC_on_thread_event_proc on_thread_event;    /* lock held to change     */

    /* Stopping the world */
    int sig_suspend, sig_restart;   /* bdwgc's defaults; the program may
                                       choose others before GC_init        */
    sem_t ack_sem;                  /* posted by each thread that stopped:
                                       the collector sleeps on it after
                                       spinning on acks                    */
    volatile AO_t acks;             /* threads stopped this time           */
    volatile AO_t world_epoch;      /* one more at each restart: a stopped
                                       thread waits for it to change       */
    volatile AO_t deferred;         /* threads that put off this stop
                                       (leaving_call) and await a resend   */
    int external_stop_cancel;       /* GC_stop_world_external's cancel state,
                                       for the matching start; lock held   */

    /* Scanning stacks */
    uintptr_t unregistered_bottom;  /* an unregistered collecting thread's
                                       stack base, found before the world
                                       stops (pthread_getattr_np mallocs,
                                       and a stopped thread may hold
                                       malloc's lock)                      */
    uintptr_t own_scan_start;       /* the collecting thread's stack is
                                       scanned from here (see
                                       lf_stacks_set_scan_start)           */
    size_t last_stacks_bytes;       /* bytes scanned, for lf_stacks_size   */

    /* Fork */
    int handle_fork;                /* -1: the program calls GC_atfork_*   */
    pthread_once_t fork_handlers_once;  /* installed when collection turns
                                           on, or when malloc mode starts  */
} thr = {
    .sig_suspend = SIGPWR,
    .sig_restart = SIGXCPU,
    .exit_key_once = PTHREAD_ONCE_INIT,
    .handle_fork = 1,
    .fork_handlers_once = PTHREAD_ONCE_INIT,
};

static __thread struct thread_rec *tl_self __attribute__((tls_model("initial-exec")));

/* A thread waiting for the lock changes its own state without it. */
static inline uint8_t state_of(struct thread_rec *t)
{
    return __atomic_load_n(&t->state, __ATOMIC_ACQUIRE);
}

extern void *__libc_stack_end;

/* pause instructions the collector spins on the answers (about 0.1 ms). */
#define ACK_SPINS 4000
/* How long a thread that put off a stop runs on after leaving
 * GC_call_with_alloc_lock before it is signalled again (resend_deferred). */
#define LEAVE_SPINS 200

/* ------------------------------------------------------------------ */
/* Records                                                             */

static struct thread_rec *rec_alloc(void)
{
    struct thread_rec *rec = thr.spare_recs;
    if (rec) {
        thr.spare_recs = rec->next;
        /* Zeros again, writing only the words that are not: a thread
         * touches two of the record's four pages (struct thread_cache),
         * and a memset made all four resident.  (MADV_DONTNEED would
         * leave them out, but costs a TLB shootdown in a threaded
         * process: malloc_larson, which replaces a thread every 10,000
         * operations, went from 117 to 174 ms.) */
        uint64_t *word = (uint64_t *)rec;
        for (size_t i = 0; i < sizeof *rec / sizeof *word; i++)
            if (word[i])
                word[i] = 0;
    } else {
        /* Zeros already: clearing would make all its pages resident, where
         * a thread that only mallocs never touches the collector's lists
         * at its start. */
        rec = mmap(NULL, sizeof *rec, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (rec == MAP_FAILED)
            return NULL;
    }
    rec->serial = ++thr.rec_serial;
    return rec;
}

LF_MALLOC_TEXT static void rec_unlink(struct thread_rec *rec)
{
    for (struct thread_rec **l = &thr.registry; *l; l = &(*l)->next)
        if (*l == rec) {
            *l = rec->next;
            rec->next = thr.spare_recs;
            thr.spare_recs = rec;
            return;
        }
}

static bool mapping_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);

/* Bytes from the thread pointer to the end of glibc's thread control
 * block (struct pthread, about 2.3 KiB), which sits at the top of the
 * thread's stack block, above its static TLS. */
#define TCB_SPAN ((uintptr_t)4096)

/* The calling thread's stack: [*lo, *hi), hi its base; 0s if unknown.
 * From the memory map, read with bare system calls: pthread_getattr_np
 * calls malloc, and a thread registers on its first allocation, which
 * malloc mode makes from inside malloc.  The mapping holding the stack
 * pointer is the stack glibc allocated (a guard page below it), ending
 * just above the control block; a stack the program gave
 * (pthread_attr_setstack) may lie in a larger mapping: it ends at its
 * control block, and its low end is left unknown. */
static void stack_of_self(uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0), tp, mlo, mhi;
    *lo = *hi = 0;
    int cancel = nocancel_begin();      /* read() is a cancellation point */
    bool found = mapping_of(sp, &mlo, &mhi);
    nocancel_end(cancel);
    if (!found)
        return;
    __asm__("mov %%fs:0, %0" : "=r"(tp));       /* the TCB points to itself */
    if (tp > sp && tp < mhi && mhi - tp > 2 * TCB_SPAN) {
        *hi = tp + TCB_SPAN;
        return;
    }
    *lo = mlo;
    *hi = mhi;
}

LF_MALLOC_TEXT static uintptr_t stack_bottom_of_self(void)
{
    if (getpid() == gettid())
        return (uintptr_t)__libc_stack_end;
    uintptr_t lo, hi;
    stack_of_self(&lo, &hi);
    return hi;
}

/* Set by GC_register_altstack before the thread is registered. */
static __thread struct alt_stacks pending_alt;

/* The main thread's static TLS (__thread variables of the program and of
 * the libraries loaded with it): glibc places it below the thread pointer
 * in a block the dynamic linker mapped, away from the stack.  Other
 * threads' lies at the top of their stack mapping, which is scanned.  A
 * module's block counts when it lies below the thread pointer in the same
 * mapping (dynamic TLS, allocated with malloc, does not). */
struct tls_search {
    uintptr_t tp, map_lo, lo, hi;
};

LF_MALLOC_TEXT static int tls_block_of(struct dl_phdr_info *info, size_t size, void *data)
{
    struct tls_search *ts = data;
    if (size < offsetof(struct dl_phdr_info, dlpi_tls_data) + sizeof info->dlpi_tls_data ||
        !info->dlpi_tls_data)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_TLS)
            continue;
        uintptr_t lo = (uintptr_t)info->dlpi_tls_data, hi = lo + ph->p_memsz;
        if (lo < ts->map_lo || hi > ts->tp || lo >= hi)
            continue;
        if (!ts->hi || lo < ts->lo)
            ts->lo = lo;
        if (hi > ts->hi)
            ts->hi = hi;
    }
    return 0;
}

static void main_static_tls(uintptr_t *lo, uintptr_t *hi)
{
    struct tls_search ts = {0, 0, 0, 0};
    uintptr_t map_hi;
    *lo = *hi = 0;
    __asm__("mov %%fs:0, %0" : "=r"(ts.tp));     /* the TCB points to itself */
    if (!mapping_of(ts.tp, &ts.map_lo, &map_hi))
        return;
    dl_iterate_phdr(tls_block_of, &ts);
    *lo = ts.lo;
    *hi = ts.hi;
}

/* Set while the calling thread registers: a malloc interposer that calls
 * back into the library from what registration calls (the dynamic
 * linker's, libc's) finds no thread cache and takes the locked path
 * rather than registering again. */
static __thread bool tl_registering __attribute__((tls_model("initial-exec")));

static void exit_destructor(void *arg);

LF_MALLOC_TEXT static void exit_key_create(void)
{
    if (pthread_key_create(&thr.exit_key, exit_destructor) != 0) {
        lf_abort("lfgc: no pthread key left for the thread exit hook");
    }
}

LF_MALLOC_TEXT __attribute__((constructor(101))) static void threads_load(void)
{
    pthread_once(&thr.exit_key_once, exit_key_create);
}

/* glibc keeps the values of keys 0..31 in the thread's control block and
 * callocs a block for each further 32 (PTHREAD_KEY_2NDLEVEL_SIZE).  A key
 * of 32 or more (code that ran before lfgc's constructor, a preinit
 * function say, took 32) makes the first pthread_setspecific of each
 * thread call calloc.  That is harmless for a thread whose cache is in
 * place, but not while lfgc initialises: with lfgc as the process's
 * malloc, the calloc waits for the initialisation it is part of.  So the
 * thread that initialises arms its exit hook when collection turns on
 * instead (malloc mode never turns it on, and never needs the hook then:
 * no collection stops threads). */
#define GLIBC_KEYS_IN_TCB 32
static __thread bool tl_hook_pending __attribute__((tls_model("initial-exec")));

LF_MALLOC_TEXT static void arm_exit_hook(struct thread_rec *rec)
{
    pthread_once(&thr.exit_key_once, exit_key_create);
    if (!lf_heap_initialized && thr.exit_key >= GLIBC_KEYS_IN_TCB) {
        tl_hook_pending = true;
        return;
    }
    tl_hook_pending = false;
    pthread_setspecific(thr.exit_key, rec);
}

/* Register the calling thread, whose stack base is `bottom` (0: find it);
 * lock not held.  Calls nothing that allocates, but pthread_setspecific
 * for a key of 32 or more (see arm_exit_hook), made once the thread cache
 * is in place. */
LF_MALLOC_TEXT static struct thread_rec *register_self(uintptr_t bottom, bool manual_only)
{
    if (tl_registering)
        return NULL;
    tl_registering = true;
    /* Before the lock: dl_iterate_phdr takes the dynamic linker's, which
     * a thread loading a library may hold while it waits for ours. */
    uintptr_t tls_lo = 0, tls_hi = 0;
    bool main_thread = getpid() == gettid();
    if (main_thread)
        main_static_tls(&tls_lo, &tls_hi);
    /* The stack's low end, when the base lies in the stack the system
     * gave the thread (not so for a coroutine's stack base).  The main
     * thread's comes from the memory map, read here rather than in the
     * first collection's pause (glibc would read it with malloc); its
     * stack grows, and a collection that finds it deeper reads it again. */
    uintptr_t lo = 0, hi = 0, stack_lo = 0;
    if (!main_thread && manual_only && !bottom) {
        /* A thread that only mallocs is neither stopped nor scanned: its
         * stack is looked up when it first calls the collector
         * (stack_find), which a server's short-lived workers may never
         * do; reading the map costs more than a thousand mallocs. */
    } else if (!main_thread) {
        stack_of_self(&lo, &hi);
        if (!bottom)
            bottom = hi;
        if (bottom > lo && bottom <= hi)
            stack_lo = lo;
    } else {
        if (!bottom)
            bottom = (uintptr_t)__libc_stack_end;
        int cancel = nocancel_begin();
        if (mapping_of(bottom - 1, &lo, &hi))
            stack_lo = lo;
        nocancel_end(cancel);
    }
    int cancel = nocancel_begin();
    lock();
    struct thread_rec *rec = rec_alloc();
    if (!rec) {
        unlock();
        nocancel_end(cancel);
        tl_registering = false;
        return NULL;
    }
    rec->id = pthread_self();
    rec->stack_bottom = bottom;
    rec->stack_lo = stack_lo;
    rec->tls_lo = tls_lo;
    rec->tls_hi = tls_hi;
    rec->alt = pending_alt;
    rec->state = T_RUNNING;
    rec->cache.manual_only = manual_only;
    lf_cache_arm_map(&rec->cache);
    rec->next = thr.registry;
    thr.registry = rec;
    tl_self = rec;
    lf_tl_cache_set(&rec->cache);
    unlock();
    nocancel_end(cancel);
    arm_exit_hook(rec);
    tl_registering = false;
    return rec;
}

/* The calling thread leaves: its free slots go back to the heap and its
 * stack is no longer scanned; the record stays (with the return value)
 * until the thread is joined, unless it is detached. */
LF_MALLOC_TEXT static void unregister_self(void *retval, bool keep_record)
{
    struct thread_rec *me = tl_self;
    if (!me)
        return;
    lock();
    lf_cache_return(&me->cache);
    lf_tl_cache_set(&lf_empty_cache);
    tl_self = NULL;
    if (keep_record && !me->detached) {
        me->retval = retval;
        me->state = T_FINISHED;
    } else {
        rec_unlink(me);
    }
    unlock();
    pthread_setspecific(thr.exit_key, NULL);
}

/* The thread's exit hook has run (or its GC_pthread_create wrapper has
 * returned).  glibc still frees memory after that, in the same thread:
 * the blocks that hold the values of keys 32 and up, its own per-thread
 * buffers.  With lfgc as malloc, those frees must not register the thread
 * again: nothing would remove that record (about 12 KiB with its cache,
 * per thread that ever ran). */
static __thread bool tl_exited __attribute__((tls_model("initial-exec")));

/* Key destructor: a thread that exits without going through our wrapper
 * (registered by hand, or on its first allocation). */
LF_MALLOC_TEXT static void exit_destructor(void *arg)
{
    (void)arg;
    unregister_self(NULL, false);
    tl_exited = true;
}

LF_MALLOC_TEXT struct thread_cache *lf_thread_cache_for_free(bool manual)
{
    if (tl_exited && !tl_self)
        return NULL;
    return manual ? lf_thread_cache_create_manual() : lf_thread_cache_create();
}

/* The calling thread's stack, registered by malloc without it
 * (register_self), looked up before the thread joins the collector: by the
 * thread itself, without the lock (it reads the map).  Until then no
 * other thread reads these fields: collections skip the thread. */
static void stack_find(struct thread_rec *me)
{
    if (me->stack_bottom)
        return;
    uintptr_t lo, hi;
    stack_of_self(&lo, &hi);
    me->stack_lo = lo;
    me->stack_bottom = hi;
}

/* The calling thread's stack base: its record's, or looked up. */
static uintptr_t my_stack_bottom(void)
{
    struct thread_rec *me = tl_self;
    return me && me->stack_bottom ? me->stack_bottom : stack_bottom_of_self();
}

struct thread_cache *lf_thread_cache_create(void)
{
    struct thread_rec *me = tl_self;
    if (!me) {
        me = register_self(0, false);
    } else if (me->cache.manual_only) {
        stack_find(me);
        /* Under the lock: no collection is stopping threads meanwhile. */
        lock();
        me->cache.manual_only = 0;
        unlock();
    }
    return me ? &me->cache : NULL;
}

LF_MALLOC_TEXT struct thread_cache *lf_thread_cache_create_manual(void)
{
    struct thread_rec *me = tl_self;
    if (!me)
        me = register_self(0, true);
    return me ? &me->cache : NULL;
}

void lf_caches_mark(void)
{
    lf_hs.cached_ptrful = lf_hs.cached_ptrfree = 0;
    lf_hs.cached_aging = lf_hs.cached_aging_ptrful = 0;
    for (struct thread_rec *t = thr.registry; t; t = t->next)
        lf_cache_mark(&t->cache);
}

void lf_caches_each(void (*fn)(struct thread_cache *tc, void *arg), void *arg)
{
    for (struct thread_rec *t = thr.registry; t; t = t->next)
        fn(&t->cache, arg);
}

LF_MALLOC_TEXT bool lf_threads_sweeping(void)
{
    for (struct thread_rec *t = thr.registry; t; t = t->next)
        if (AO_load_full(&t->cache.sweeping))
            return true;
    return false;
}

/* ------------------------------------------------------------------ */
/* Stopping the world                                                   */

static void suspend_handler(int sig, siginfo_t *info, void *context)
{
    (void)sig;
    (void)info;
    int saved_errno = errno;
    struct thread_rec *me = tl_self;
    if (!me) {
        errno = saved_errno;
        return;
    }
    ucontext_t *uc = context;
    bool external = __atomic_load_n(&me->ext_suspended, __ATOMIC_ACQUIRE);
    /* Inside lf_unlock_to_caller: not yet.  The collector signals again
     * once the thread has returned to its caller (resend_deferred). */
    if (me->leaving_call && !external && me->stop_deferred == 0) {
        me->stop_deferred = 1;
        AO_fetch_and_add1_full(&thr.deferred);
        sem_post(&thr.ack_sem);
        errno = saved_errno;
        return;
    }
    /* A stopped thread must not unwind while the collector scans its
     * stack: sigsuspend below is a cancellation point.  (glibc's
     * pthread_setcancelstate is only atomic operations on the thread's
     * own flags: safe in a handler.)  A request that comes meanwhile
     * takes effect at nocancel_end, with PTHREAD_CANCELED as the result. */
    int cancel = nocancel_begin();
    AO_t epoch = AO_load_full(&thr.world_epoch);
    memcpy(me->regs, uc->uc_mcontext.gregs, sizeof me->regs);
    /* Below the interrupted stack pointer lies the red zone. */
    me->stack_sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP] - 128;
    /* Counted before the post: the collector goes on when the count is
     * complete, and a post it finds still pending is harmless. */
    AO_fetch_and_add1_full(&thr.acks);
    sem_post(&thr.ack_sem);
    sigset_t wait;
    sigfillset(&wait);
    sigdelset(&wait, thr.sig_restart);
    if (external) {
        while (__atomic_load_n(&me->ext_suspended, __ATOMIC_ACQUIRE))
            sigsuspend(&wait);
        __atomic_store_n(&me->parked, 0, __ATOMIC_RELEASE);
    } else
        while (AO_load_full(&thr.world_epoch) == epoch)
            sigsuspend(&wait);
    nocancel_end(cancel);
    errno = saved_errno;
}

static void restart_handler(int sig)
{
    (void)sig;
}

static void install_handlers(void)
{
    /* One handler would replace the other, and no thread would ever
     * answer a collection's suspend request: refuse, as bdwgc 8.2 does. */
    if (thr.sig_suspend == thr.sig_restart) {
        char msg[160];
        snprintf(msg, sizeof msg, "lfgc: the thread suspend and restart signals are the same "
                 "(%d): GC_set_suspend_signal and GC_set_thr_restart_signal need two", thr.sig_suspend);
        lf_abort(msg);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = suspend_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    /* Deadly signals stay deliverable inside the handler. */
    sigdelset(&sa.sa_mask, SIGSEGV);
    sigdelset(&sa.sa_mask, SIGBUS);
    sigdelset(&sa.sa_mask, SIGILL);
    sigdelset(&sa.sa_mask, SIGFPE);
    sigdelset(&sa.sa_mask, SIGABRT);
    if (sigaction(thr.sig_suspend, &sa, NULL) != 0)
        fprintf(stderr, "lfgc: cannot install the suspend handler on signal %d\n",
                thr.sig_suspend);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = restart_handler;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (sigaction(thr.sig_restart, &sa, NULL) != 0)
        fprintf(stderr, "lfgc: cannot install the restart handler on signal %d\n",
                thr.sig_restart);
}

static void wait_for_acks(unsigned sent);
static void resend_deferred(void);

/* Set by the thread that stops the world, until it restarts it: its
 * messages then must not take locks a stopped thread may hold. */
static __thread bool tl_world_stopped __attribute__((tls_model("initial-exec")));

bool lf_world_stopped_by_self(void)
{
    return tl_world_stopped;
}

void lf_stop_world(void)
{
    struct thread_rec *me = tl_self;
    unsigned sent = 0;
    if (!me)
        thr.unregistered_bottom = stack_bottom_of_self();
    tl_world_stopped = true;
    AO_store(&thr.acks, 0);
    for (struct thread_rec *t = thr.registry; t; t = t->next) {
        /* One GC_suspend_thread stopped is stopped already. */
        t->suspended = t->ext_suspended;
        t->stop_deferred = 0;
        if (t == me || t->ext_suspended || state_of(t) != T_RUNNING || t->cache.manual_only)
            continue;
        int err = pthread_kill(t->id, thr.sig_suspend);
        if (err == 0) {
            t->suspended = 1;
            sent++;
            if (thr.on_thread_event)
                thr.on_thread_event(GC_EVENT_THREAD_SUSPENDED, (void *)t->id);
        } else {
            /* Gone without unregistering: nothing of it to scan. */
            t->state = T_FINISHED;
        }
    }
    wait_for_acks(sent);
}

/* Signal again the threads that put off this stop (suspend_handler),
 * once each has left GC_call_with_alloc_lock.  It is a few instructions
 * from there unless descheduled: wait for it, up to a second, then signal
 * it wherever it is. */
static void resend_deferred(void)
{
    for (struct thread_rec *t = thr.registry; t; t = t->next) {
        if (t->stop_deferred != 1)
            continue;
        struct timespec now, deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += 1;
        for (unsigned i = 0; t->leaving_call; i++) {
            if (i < 100) {
                __builtin_ia32_pause();
                continue;
            }
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec > deadline.tv_sec ||
                (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
                break;
            sched_yield();
        }
        for (unsigned i = 0; i < LEAVE_SPINS; i++)
            __builtin_ia32_pause();
        t->stop_deferred = 2;
        AO_fetch_and_sub1_full(&thr.deferred);
        if (pthread_kill(t->id, thr.sig_suspend) != 0) {
            /* Gone without unregistering, as in lf_stop_world. */
            t->state = T_FINISHED;
            t->suspended = 0;
            AO_fetch_and_add1_full(&thr.acks);
        }
    }
}

/* Wait until `sent` threads answered the suspend signal.  A stopped
 * thread answers within microseconds when it was running: spin before
 * paying for a sleep and a wake-up.  Only the count says who answered;
 * the semaphore just wakes us. */
static void wait_for_acks(unsigned sent)
{
    for (unsigned i = 0; i < ACK_SPINS && AO_load_acquire(&thr.acks) < sent; i++)
        __builtin_ia32_pause();
    while (AO_load_acquire(&thr.acks) < sent) {
        if (AO_load_acquire(&thr.deferred)) {
            resend_deferred();
            continue;
        }
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 10;
        if (sem_timedwait(&thr.ack_sem, &deadline) != 0 && errno == ETIMEDOUT)
            lf_warn("GC Warning: a thread has not answered the suspend signal "
                 "(%p) for 10 s; is it blocked in that thread?\n",
                 (uintptr_t)thr.sig_suspend);
    }
    /* Posts not waited for would only cause early wake-ups later. */
    while (sem_trywait(&thr.ack_sem) == 0)
        ;
}

void lf_start_world(void)
{
    AO_fetch_and_add1_full(&thr.world_epoch);
    for (struct thread_rec *t = thr.registry; t; t = t->next)
        if (t->suspended) {
            t->suspended = 0;
            if (t->ext_suspended)
                continue;
            pthread_kill(t->id, thr.sig_restart);
            if (thr.on_thread_event)
                thr.on_thread_event(GC_EVENT_THREAD_UNSUSPENDED, (void *)t->id);
        }
    tl_world_stopped = false;
    lf_messages_flush();
}

/* The unlock of GC_call_with_alloc_lock and GC_alloc_unlock.  A caller
 * may finish right after the call what it began under the lock (Guile
 * 3.0's VM stack expansion moves the frame pointer under the lock and
 * sets the stack pointer after it); stopped in between, its state is
 * inconsistent to its own mark procedures.  The unlock is the long part
 * of that window: when the collector waits for the lock, the unlock's
 * futex wake is a system call, and the collector stops the world before
 * it returns.  A stop that comes while leaving_call is set is put off
 * until the unlock has returned (suspend_handler, resend_deferred). */
void lf_unlock_to_caller(void)
{
    struct thread_rec *me = tl_self;
    if (me) {
        me->leaving_call = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    }
    unlock();
    if (me) {
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        me->leaving_call = 0;
    }
}

/* ------------------------------------------------------------------ */
/* Stacks                                                              */

size_t lf_stacks_size(void)
{
    return thr.last_stacks_bytes;
}

static void mark_stack_range(uintptr_t lo, uintptr_t hi)
{
    if (lo >= hi)
        return;
    lf_mark_stack_range((void *)lo, (void *)hi);
    thr.last_stacks_bytes += hi - lo;
}

/* The readable mapping holding addr, from /proc/self/maps, read with bare
 * system calls: the world is stopped, and a stopped thread may hold
 * malloc's or stdio's lock. */
LF_MALLOC_TEXT static bool mapping_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
    int fd = open(LF_STR("/proc/self/maps"), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[4096];
    /* Per line: field 0 the start, 1 the end, 2 the permissions. */
    unsigned field = 0;
    uintptr_t start = 0, end = 0;
    bool found = false, readable = false;
    ssize_t n;
    while (!found && (n = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            char ch = buf[i];
            if (ch == '\n') {
                if (readable && addr >= start && addr < end) {
                    found = true;
                    break;
                }
                field = 0;
                start = end = 0;
                readable = false;
            } else if (field < 2 && ch != '-' && ch != ' ') {
                unsigned d = (unsigned)(ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10);
                if (field == 0)
                    start = start << 4 | d;
                else
                    end = end << 4 | d;
            } else if (field < 2) {
                field++;
            } else if (field == 2) {
                readable = ch == 'r';
                field++;
            }
        }
    }
    close(fd);
    if (found) {
        *lo = start;
        *hi = end;
    }
    return found;
}

static void scan_stack_off(struct thread_rec *t, uintptr_t sp, uintptr_t bottom);

/* A thread's stack, scanned from sp, its deepest live point, to its
 * base, when sp lies in the stack the base belongs to: the usual case,
 * with no system call. */
static void scan_stack(struct thread_rec *t, uintptr_t sp)
{
    uintptr_t bottom = t->stack_bottom;
    if (t->stack_lo && sp >= t->stack_lo && sp <= bottom)
        mark_stack_range(sp, bottom);
    else
        scan_stack_off(t, sp, bottom);
}

/* The extent of the stack holding addr, for a stack met unannounced:
 * the heap object around it when it lies in one (a coroutine's stack
 * allocated from the collector, whose mapping would be a whole region:
 * 32 GiB to read), else its mapping.  A large object ends at the bytes it
 * was given, a small one at its slot. */
static bool stack_extent_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
    if (!lowfat_is_heap_ptr((const void *)addr))
        return mapping_of(addr, lo, hi);
    uintptr_t base = (uintptr_t)lowfat_base((const void *)addr);
    const struct region *r = region_of((const void *)base);
    uint64_t size = r->size;
    if (r->large) {
        uint64_t bytes = span_at(r, span_index_of(r, base))->obj_bytes;
        if (addr - base < bytes)
            size = bytes;
    }
    *lo = base;
    *hi = base + size;
    return true;
}

/* Otherwise the thread runs on another stack (a signal stack, a
 * coroutine's) or its own grew past what we knew.  Where sp lies, scan
 * up to the end of the signal stack GC_register_altstack gave or of the
 * mapping (or heap object); and scan the whole of the thread's own
 * stack, as how deep it was when the thread left it is not known.
 * Conservative, and rare. */
static void scan_stack_off(struct thread_rec *t, uintptr_t sp, uintptr_t bottom)
{
    uintptr_t lo, hi;
    const struct alt_stacks *a = t ? &t->alt : NULL;
    bool on_alt = a && sp >= a->alt_lo && sp < a->alt_hi;
    if (on_alt && a->norm_hi > a->norm_lo) {
        mark_stack_range(sp, a->alt_hi);
        mark_stack_range(a->norm_lo, bottom > a->norm_lo && bottom <= a->norm_hi ? bottom
                                                                                 : a->norm_hi);
        return;
    }
    if (!bottom || !stack_extent_of(bottom - 1, &lo, &hi)) {
        /* No memory map to go by (no /proc): trust a stack pointer that
         * lies below the base, as far as a stack may reach. */
        if (sp <= bottom && bottom - sp <= ((uintptr_t)1 << 32))
            mark_stack_range(sp, bottom);
        return;
    }
    if (t)
        t->stack_lo = lo;
    if (sp >= lo && sp <= bottom) {
        mark_stack_range(sp, bottom);
        return;
    }
    uintptr_t own_lo = lo;
    if (on_alt)
        mark_stack_range(sp, a->alt_hi);
    else if (stack_extent_of(sp, &lo, &hi))
        mark_stack_range(sp, hi);
    mark_stack_range(own_lo, bottom);
}

/* Where the calling thread entered the library (lf_entered), 0 outside:
 * the stack pointer of the caller, below which lf_entered pushed the
 * caller's callee-saved registers. */
static __thread uintptr_t entry_sp __attribute__((tls_model("initial-exec")));

void *lf_entered_body(lf_entry_fn *fn, uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t sp);

/* lf_entered(fn, a, b, c): push the six callee-saved registers, so that
 * the caller's values of them lie just below its frame, and call
 * lf_entered_body(fn, a, b, c, sp) with sp the address of the last push.
 * Scanned from sp, the thread's stack holds those registers, the return
 * address and then only the program's frames: no slot the library left
 * unwritten.  In assembly, as C says nothing of where its frames keep
 * saved registers or padding.  The extra 8 bytes align the stack for the
 * call. */
__asm__(".text\n"
        ".globl lf_entered\n"
        ".hidden lf_entered\n"
        ".type lf_entered, @function\n"
        "lf_entered:\n"
        ".cfi_startproc\n"
        "pushq %rbp\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %rbp, 0\n"
        "pushq %rbx\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %rbx, 0\n"
        "pushq %r12\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %r12, 0\n"
        "pushq %r13\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %r13, 0\n"
        "pushq %r14\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %r14, 0\n"
        "pushq %r15\n.cfi_adjust_cfa_offset 8\n.cfi_rel_offset %r15, 0\n"
        "movq %rsp, %r8\n"
        "subq $8, %rsp\n.cfi_adjust_cfa_offset 8\n"
        "call lf_entered_body\n"
        "addq $8, %rsp\n.cfi_adjust_cfa_offset -8\n"
        "popq %r15\n.cfi_adjust_cfa_offset -8\n.cfi_restore %r15\n"
        "popq %r14\n.cfi_adjust_cfa_offset -8\n.cfi_restore %r14\n"
        "popq %r13\n.cfi_adjust_cfa_offset -8\n.cfi_restore %r13\n"
        "popq %r12\n.cfi_adjust_cfa_offset -8\n.cfi_restore %r12\n"
        "popq %rbx\n.cfi_adjust_cfa_offset -8\n.cfi_restore %rbx\n"
        "popq %rbp\n.cfi_adjust_cfa_offset -8\n.cfi_restore %rbp\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size lf_entered, .-lf_entered\n");

/* Set when the calling thread ran a collection since it entered. */
static __thread bool collected_here __attribute__((tls_model("initial-exec")));

/* Bytes of dead stack cleared below an entry after a collection: what a
 * collection reaches below it is about 4 KiB (more in instrumented
 * builds).  Only when the stack has room for it and as much again. */
#define CLEAR_AFTER_COLLECT ((uintptr_t)16 << 10)

static __attribute__((noinline)) void clear_below(size_t n)
{
    char buf[n];
    memset(buf, 0, n);
    __asm__ volatile("" : : "r"(buf) : "memory");
}

/* A collection leaves, below the frame that entered the library, the
 * collector's dead frames: full of heap addresses (objects it marked,
 * pages it swept).  A frame the program pushes there later keeps them in
 * the slots it does not write (padding, arrays), where the next
 * collection finds them.  Cleared once the collection returns.  Only on
 * the thread's own stack, whose extent is known. */
static void clear_dead_stack(void)
{
    struct thread_rec *me = tl_self;
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    if (me && me->stack_lo && sp > me->stack_lo && sp <= me->stack_bottom &&
        sp - me->stack_lo >= 2 * CLEAR_AFTER_COLLECT)
        clear_below(CLEAR_AFTER_COLLECT);
}

/* Nested entries (a callback of the program's that allocates) record
 * their own: the innermost one is below every frame of the program. */
void *lf_entered_body(lf_entry_fn *fn, uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t sp)
{
    uintptr_t outer = entry_sp;
    entry_sp = sp;
    void *r = fn(a, b, c);
    entry_sp = outer;
    if (unlikely(collected_here)) {
        collected_here = false;
        clear_dead_stack();
    }
    return r;
}

/* Where the collecting thread's own stack is scanned from: where it
 * entered the library.  The collector's frames since (those of the
 * allocation slow path, of lf_collect and deeper) are not scanned, so
 * that what they left in slots they never wrote, or hold (span and
 * free-list addresses), retains nothing.  `sp` is a point in
 * lf_collect's frame, below the registers it saved: the start when no
 * entry is recorded above it (a value left by a longjmp out of an entry
 * lies below the live frames; with every collection entered, none can lie
 * above the innermost live entry). */

void lf_stacks_set_scan_start(const void *sp)
{
    thr.own_scan_start = entry_sp > (uintptr_t)sp ? entry_sp : (uintptr_t)sp;
    collected_here = true;
}

bool lf_stacks_contain(uintptr_t p)
{
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    for (struct thread_rec *t = thr.registry; t; t = t->next) {
        if (state_of(t) == T_FINISHED)
            continue;
        uintptr_t lo = t->stack_lo ? t->stack_lo : t == tl_self ? sp : t->stack_sp;
        if ((p >= lo && p < t->stack_bottom) || (p >= t->tls_lo && p < t->tls_hi))
            return true;
    }
    return false;
}

/* Registered threads' stacks from where the last collection scanned them
 * (or where they blocked), the calling thread's from `own`, and their
 * static TLS. */
uintptr_t lf_stacks_find(uintptr_t lo, uintptr_t hi, uintptr_t own)
{
    for (struct thread_rec *t = thr.registry; t; t = t->next) {
        uint8_t state = state_of(t);
        if (state == T_FINISHED || t->cache.manual_only)
            continue;
        uintptr_t from = t == tl_self ? own : state == T_BLOCKING ? t->blocking_sp : t->stack_sp;
        uintptr_t a = 0;
        if (from && from < t->stack_bottom)
            a = lf_word_find(from, t->stack_bottom, lo, hi);
        if (!a && t->tls_hi)
            a = lf_word_find(t->tls_lo, t->tls_hi, lo, hi);
        if (a)
            return a;
    }
    return 0;
}

void lf_stacks_mark(void)
{
    struct thread_rec *me = tl_self;
    thr.last_stacks_bytes = 0;
    if (me)
        scan_stack(me, thr.own_scan_start);
    else
        scan_stack_off(NULL, thr.own_scan_start, thr.unregistered_bottom);
    for (struct thread_rec *t = thr.registry; t; t = t->next) {
        lf_mark_range(&t->retval, &t->retval + 1);
        uint8_t state = state_of(t);
        if (state == T_FINISHED || t->cache.manual_only)
            continue;
        if (t->tls_hi)
            mark_stack_range(t->tls_lo, t->tls_hi);
        if (t == me)
            continue;
        if (state == T_BLOCKING) {
            scan_stack(t, t->blocking_sp);
            continue;
        }
        if (!t->suspended)
            continue;
        lf_mark_stack_range(t->regs, t->regs + NGREG);
        scan_stack(t, t->stack_sp);
    }
}

/* ------------------------------------------------------------------ */
/* fork                                                                 */

/* glibc's stdio list lock, which its fork takes after the prepare
 * handlers (public, recursive). */
extern void _IO_list_lock(void);
extern void _IO_list_unlock(void);

/* Whether this thread's fork took the locks (its prepare handler ran). */
static __thread bool tl_fork_locked __attribute__((tls_model("initial-exec")));

/* Like a collection, fork waits for threads sweeping outside the lock:
 * the child must not inherit a half-built list.
 *
 * The stdio list lock comes first, as glibc orders its own malloc locks
 * after it: a thread in getline holds its stream's lock while it
 * reallocates, and fflush(NULL) holds the list lock while it waits for
 * that stream; taking our lock first would close the cycle (glibc's bug
 * 19431).  A process with one thread takes neither, as glibc's fork
 * does: nothing can hold them but this very thread, interrupted inside
 * the allocator by the signal whose handler forks. */
LF_MALLOC_TEXT static void atfork_prepare(void)
{
    tl_fork_locked = !__libc_single_threaded;
    if (!tl_fork_locked)
        return;
    _IO_list_lock();
    lock();
    lf_sweepers_hold();
}

LF_MALLOC_TEXT static void atfork_parent(void)
{
    if (!tl_fork_locked)
        return;
    lf_sweepers_release();
    unlock();
    _IO_list_unlock();
}

/* Only the forking thread exists in the child.  glibc has reset its
 * stdio list lock by now; ours is made anew below. */
LF_MALLOC_TEXT static void atfork_child(void)
{
    struct thread_rec *me = tl_self;
    struct thread_rec *t = thr.registry;
    thr.registry = NULL;
    while (t) {
        struct thread_rec *next = t->next;
        if (t == me) {
            t->next = thr.registry;
            thr.registry = t;
        } else {
            t->next = thr.spare_recs;
            thr.spare_recs = t;
        }
        t = next;
    }
    if (me)
        me->id = pthread_self();
    lf_groups_after_fork(me ? &me->cache : NULL);
    AO_store(&lf_gc_pending, 0);
    sem_init(&thr.ack_sem, 0, 0);
    lf_mark_after_fork();
    lf_dirty_after_fork();
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&lf_gc_lock, &attr);
    pthread_mutexattr_destroy(&attr);
}

LF_MALLOC_TEXT void lf_threads_init(void)
{
    sem_init(&thr.ack_sem, 0, 0);
    pthread_once(&thr.exit_key_once, exit_key_create);
    /* The thread that initialises is registered: usually the main one,
     * whose base a program may have set in GC_stackbottom (bdwgc's). */
    bool main_thread = getpid() == gettid();
    bool ours = !lf_gc_names_foreign;
    uintptr_t bottom = main_thread && ours && GC_stackbottom ? (uintptr_t)GC_stackbottom
                                                             : stack_bottom_of_self();
    register_self(bottom, false);
    if (main_thread && ours)
        GC_stackbottom = (char *)bottom;
}

/* The suspend and restart handlers and the fork handlers: installed only
 * when collection turns on, as a program that takes only uncollectable
 * memory (malloc mode) may own those signals. */
void lf_threads_collection_on(void)
{
    if (tl_hook_pending && tl_self)
        arm_exit_hook(tl_self);
    install_handlers();
    lf_fork_handlers_install();
}

/* pthread_atfork is a stub from libc_nonshared.a, linked at the end of
 * the library's code, far from the rest of the start-up code (see
 * LF_MALLOC_TEXT): call what it calls, libc's __register_atfork (public
 * since glibc 2.3.2), with this library's handle, so that dlclose drops
 * the handlers. */
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                             void *dso_handle);
extern void *__dso_handle __attribute__((weak));

LF_MALLOC_TEXT static void fork_handlers_once_fn(void)
{
    if (thr.handle_fork != -1)
        __register_atfork(atfork_prepare, atfork_parent, atfork_child, &__dso_handle);
}

LF_MALLOC_TEXT void lf_fork_handlers_install(void)
{
    pthread_once(&thr.fork_handlers_once, fork_handlers_once_fn);
}

/* Does p lie on the calling thread's stack?  (For malloc's messages.) */
bool lf_on_own_stack(const void *p)
{
    uintptr_t a = (uintptr_t)p, here = (uintptr_t)__builtin_frame_address(0);
    uintptr_t lo, hi;
    if (tl_self && tl_self->stack_lo) {
        lo = tl_self->stack_lo;
        hi = tl_self->stack_bottom;
    } else if (getpid() == gettid()) {
        lo = here - ((uintptr_t)8 << 20);
        hi = (uintptr_t)__libc_stack_end + ((uintptr_t)1 << 20);
    } else {
        stack_of_self(&lo, &hi);
    }
    return a >= lo && a < hi;
}

/* ------------------------------------------------------------------ */
/* bdwgc's thread interface                                             */

LFGC_EXPORT void GC_allow_register_threads(void)
{
    lf_ensure_init();
    thr.allow_register = true;
}

LFGC_EXPORT int GC_register_my_thread(const struct GC_stack_base *sb)
{
    lf_ensure_init();
    if (tl_self && tl_self->cache.manual_only) {
        /* Known to malloc only so far: now to the collector too. */
        stack_find(tl_self);
        lock();
        if (sb && sb->mem_base)
            tl_self->stack_bottom = (uintptr_t)sb->mem_base;
        tl_self->cache.manual_only = 0;
        unlock();
        return GC_SUCCESS;
    }
    if (tl_self)
        return GC_DUPLICATE;
    /* As in bdwgc, a program that created a thread with GC_pthread_create
     * may register others; otherwise say so, once. */
    static LF_UNSCANNED volatile AO_t warned;
    if (!thr.allow_register && AO_compare_and_swap_full(&warned, 0, 1))
        lf_warn("GC Warning: GC_register_my_thread without GC_allow_register_threads "
             "(thread %p); registering anyway (said once)\n", (uintptr_t)pthread_self());
    uintptr_t bottom = sb && sb->mem_base ? (uintptr_t)sb->mem_base : 0;
    return register_self(bottom, false) ? GC_SUCCESS : GC_NO_MEMORY;
}

LFGC_EXPORT int GC_unregister_my_thread(void)
{
    if (!tl_self)
        return GC_NOT_FOUND;
    unregister_self(NULL, false);
    return GC_SUCCESS;
}

LFGC_EXPORT int GC_thread_is_registered(void)
{
    return tl_self != NULL;
}

LFGC_EXPORT int GC_get_stack_base(struct GC_stack_base *sb)
{
    uintptr_t bottom = my_stack_bottom();
    if (!bottom)
        return GC_UNIMPLEMENTED;
    sb->mem_base = (void *)bottom;
    return GC_SUCCESS;
}

LFGC_EXPORT void *GC_call_with_stack_base(GC_stack_base_func fn, void *arg)
{
    struct GC_stack_base sb;
    volatile int here;
    /* As bdwgc: the base is this frame; fn's frames lie below it. */
    sb.mem_base = (void *)&here;
    void *r = fn(&sb, arg);
    __asm__ volatile("" ::: "memory");
    return r;
}

/* Record where the blocking section starts, with the registers spilled
 * into the frame above it. */
static void __attribute__((noinline)) enter_blocking(struct thread_rec *me)
{
    volatile uintptr_t here = 0;
    lock();
    me->blocking_sp = (uintptr_t)&here;
    me->state = T_BLOCKING;
    unlock();
}

/* The lock is taken: wait for it as a blocking section, so that a
 * collection started meanwhile (by the holder) scans this thread's stack
 * from here instead of signalling it.  Waking a thread asleep in the lock
 * wait, on an idle CPU, to answer a signal costs tens of microseconds per
 * collection.  The state goes back to running once the lock is ours: no
 * collection runs while we hold it. */
LF_MALLOC_TEXT void __attribute__((noinline)) lf_lock_contended(void)
{
    __builtin_unwind_init();
    volatile uintptr_t here = 0;
    struct thread_rec *me = tl_self;
    if (!me || __atomic_load_n(&me->state, __ATOMIC_RELAXED) != T_RUNNING) {
        pthread_mutex_lock(&lf_gc_lock);
        return;
    }
    me->blocking_sp = (uintptr_t)&here;
    __atomic_store_n(&me->state, T_BLOCKING, __ATOMIC_RELEASE);
    pthread_mutex_lock(&lf_gc_lock);
    __atomic_store_n(&me->state, T_RUNNING, __ATOMIC_RELAXED);
}

/* Coroutine libraries move a thread between stacks: they read and set
 * the bottom of the stack lfgc scans. */
LFGC_EXPORT void *GC_get_my_stackbottom(struct GC_stack_base *sb)
{
    struct thread_rec *me = tl_self;
    sb->mem_base = (void *)my_stack_bottom();
    return me;
}

LFGC_EXPORT void GC_set_stackbottom(void *gc_thread, const struct GC_stack_base *sb)
{
    struct thread_rec *t = gc_thread ? gc_thread : tl_self;
    if (!t || !sb || !sb->mem_base) {
        lf_warn("GC Warning: GC_set_stackbottom: no registered thread or no base (%p); "
             "ignored\n", (uintptr_t)(sb ? sb->mem_base : NULL));
        return;
    }
    t->stack_bottom = (uintptr_t)sb->mem_base;
    t->stack_lo = 0;            /* the next collection finds its mapping */
}

LFGC_EXPORT void GC_set_on_thread_event(GC_on_thread_event_proc fn)
{
    lock();
    thr.on_thread_event = fn;
    unlock();
}

LFGC_EXPORT GC_on_thread_event_proc GC_get_on_thread_event(void)
{
    lock();
    GC_on_thread_event_proc fn = thr.on_thread_event;
    unlock();
    return fn;
}

/* bdwgc's fork interface: GC_set_handle_fork(-1) before GC_init says the
 * program calls these around fork() itself; otherwise lfgc's own
 * pthread_atfork handlers do the work and these do nothing. */
LFGC_EXPORT void GC_set_handle_fork(int how)
{
    if (!lf_gc_initialized)
        thr.handle_fork = how;
}

LFGC_EXPORT void GC_atfork_prepare(void)
{
    lf_ensure_init();
    if (thr.handle_fork == -1)
        atfork_prepare();
}

LFGC_EXPORT void GC_atfork_parent(void)
{
    if (thr.handle_fork == -1)
        atfork_parent();
}

LFGC_EXPORT void GC_atfork_child(void)
{
    if (thr.handle_fork == -1)
        atfork_child();
}

LFGC_EXPORT void GC_alloc_lock(void)
{
    lf_ensure_init();
    lock();
}

LFGC_EXPORT void GC_alloc_unlock(void)
{
    lf_unlock_to_caller();
}

/* The end of a blocking section, also when the thread is unwound out of
 * it (cancelled, or pthread_exit in fn): its cleanup handlers then run
 * ordinary code, which may allocate and hold objects deeper than where
 * the section began, so it must be stopped and scanned as running. */
static void leave_blocking(void *arg)
{
    struct thread_rec *me = arg;
    lock();                          /* waits for a collection to end */
    me->state = T_RUNNING;
    unlock();
}

LFGC_EXPORT void *GC_do_blocking(GC_fn_type fn, void *client_data)
{
    struct thread_rec *me = tl_self;
    if (!me || me->state != T_RUNNING)
        return fn(client_data);
    __builtin_unwind_init();
    enter_blocking(me);
    void *r;
    pthread_cleanup_push(leave_blocking, me);
    r = fn(client_data);
    pthread_cleanup_pop(1);
    __asm__ volatile("" ::: "memory");
    return r;
}

LFGC_EXPORT void *GC_call_with_gc_active(GC_fn_type fn, void *client_data)
{
    struct thread_rec *me = tl_self;
    if (!me || me->state != T_BLOCKING)
        return fn(client_data);
    lock();
    me->state = T_RUNNING;
    unlock();
    void *r = fn(client_data);
    lock();
    me->state = T_BLOCKING;          /* blocking_sp is unchanged */
    unlock();
    return r;
}

LFGC_EXPORT void GC_set_markers_count(unsigned n)
{
    if (!lf_heap_initialized)       /* read when the heap is set up */
        lf_mark_set_markers(n);
}

LFGC_EXPORT int GC_get_parallel(void)
{
    lf_ensure_init();
    return (int)lf_mark_markers() - 1;
}

LFGC_EXPORT LF_UNSCANNED int GC_parallel;
/* This library's own GC_parallel, whatever the loader bound the name to. */
extern int lf_own_parallel __attribute__((alias("GC_parallel"), visibility("hidden")));
LFGC_EXPORT LF_UNSCANNED char *GC_stackbottom;

LFGC_EXPORT void GC_register_altstack(void *stack_start, GC_word stack_size,
                                      void *altstack_base, GC_word altstack_size)
{
    struct alt_stacks a = {(uintptr_t)altstack_base, (uintptr_t)altstack_base + altstack_size,
                           (uintptr_t)stack_start, (uintptr_t)stack_start + stack_size};
    struct thread_rec *me = tl_self;
    if (!me) {
        pending_alt = a;
        return;
    }
    lock();
    me->alt = a;
    unlock();
}


LFGC_EXPORT void GC_stop_world_external(void)
{
    lf_ensure_init();
    int cancel = nocancel_begin();
    lock();
    thr.external_stop_cancel = cancel;
    lf_sweepers_hold();
    lf_stop_world();
}

LFGC_EXPORT void GC_start_world_external(void)
{
    lf_start_world();
    lf_sweepers_release();
    int cancel = thr.external_stop_cancel;
    unlock();
    nocancel_end(cancel);
}

static struct thread_rec *find_rec(pthread_t id);

/* bdwgc's external suspension (javaxfc.h): a thread stays stopped, as by
 * a collection, until GC_resume_thread; collections meanwhile scan what
 * it saved and leave it stopped.  No count: one resume undoes any number
 * of suspends. */
static void *wait_until_resumed(void *arg)
{
    struct thread_rec *me = arg;
    sigset_t restart, old;
    sigemptyset(&restart);
    sigaddset(&restart, thr.sig_restart);
    pthread_sigmask(SIG_BLOCK, &restart, &old);
    sigset_t wait = old;
    sigdelset(&wait, thr.sig_restart);
    while (__atomic_load_n(&me->ext_suspended, __ATOMIC_ACQUIRE))
        sigsuspend(&wait);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return NULL;
}

/* Inside a blocking section already, so that no collection can find the
 * thread marked suspended but running: it is scanned from where the
 * section began. */
static void *suspend_self(void *arg)
{
    struct thread_rec *me = arg;
    int cancel = nocancel_begin();      /* stays suspended until resumed */
    lock();
    __atomic_store_n(&me->ext_suspended, 1, __ATOMIC_RELEASE);
    unlock();
    wait_until_resumed(me);
    nocancel_end(cancel);
    return NULL;
}

LFGC_EXPORT void GC_suspend_thread(GC_SUSPEND_THREAD_ID id)
{
    lf_ensure_init();
    lock();
    struct thread_rec *t = find_rec(id);
    if (!t || t->ext_suspended) {
        unlock();
        return;
    }
    if (state_of(t) == T_FINISHED) {
        /* Ended, not yet joined: nothing left to stop, but as in bdwgc it
         * reads as suspended until resumed (or joined). */
        t->ext_suspended = 1;
        unlock();
        return;
    }
    if (t == tl_self) {
        unlock();
        GC_do_blocking(suspend_self, t);
        return;
    }
    int cancel = nocancel_begin();      /* waits for the answer, lock held */
    __atomic_store_n(&t->ext_suspended, 1, __ATOMIC_RELEASE);
    /* Not in the middle of a sweep, which a collection would wait for. */
    lf_sweepers_hold();
    AO_store(&thr.acks, 0);
    __atomic_store_n(&t->parked, 1, __ATOMIC_RELAXED);
    if (pthread_kill(t->id, thr.sig_suspend) != 0) {
        t->ext_suspended = 0;
        t->parked = 0;
    } else {
        wait_for_acks(1);
    }
    lf_sweepers_release();
    unlock();
    nocancel_end(cancel);
}

LFGC_EXPORT void GC_resume_thread(GC_SUSPEND_THREAD_ID id)
{
    lf_ensure_init();
    lock();
    struct thread_rec *t = find_rec(id);
    if (t && t->ext_suspended) {
        __atomic_store_n(&t->ext_suspended, 0, __ATOMIC_RELEASE);
        if (state_of(t) == T_FINISHED) {
            unlock();
            return;
        }
        pthread_kill(t->id, thr.sig_restart);
        /* Out of the handler before anyone may suspend it again: a new
         * suspend signal would wait behind a handler that saw the flag
         * set again and never returns. */
        while (__atomic_load_n(&t->parked, __ATOMIC_ACQUIRE))
            sched_yield();
    }
    unlock();
}

LFGC_EXPORT int GC_is_thread_suspended(GC_SUSPEND_THREAD_ID id)
{
    lf_ensure_init();
    lock();
    struct thread_rec *t = find_rec(id);
    int r = t && t->ext_suspended;
    unlock();
    return r;
}

LFGC_EXPORT void GC_start_mark_threads(void)
{
    lf_ensure_init();
    lock();
    lf_mark_prepare();
    unlock();
}

LFGC_EXPORT void GC_set_suspend_signal(int sig)
{
    if (lf_gc_initialized)
        return;                      /* as bdwgc: only before GC_init */
    thr.sig_suspend = sig;
}

LFGC_EXPORT void GC_set_thr_restart_signal(int sig)
{
    if (lf_gc_initialized)
        return;
    thr.sig_restart = sig;
}

LFGC_EXPORT int GC_get_suspend_signal(void)
{
    return thr.sig_suspend;
}

LFGC_EXPORT int GC_get_thr_restart_signal(void)
{
    return thr.sig_restart;
}

/* ------------------------------------------------------------------ */
/* pthread wrappers                                                     */

struct start_info {
    void *(*start)(void *);
    void *arg;
    bool detached;
    sem_t registered;
};

static void exit_cleanup(void *arg)
{
    struct thread_rec *me = arg;
    unregister_self(me ? me->retval : NULL, true);
    tl_exited = true;
}

static void *thread_start(void *p)
{
    struct start_info *si = p;
    void *(*start)(void *) = si->start;
    void *arg = si->arg;
    struct thread_rec *me = register_self(0, false);
    if (me && si->detached)
        me->detached = 1;
    /* From here on the creator's copy of arg is not needed: ours is on a
     * scanned stack. */
    sem_post(&si->registered);
    void *result;
    pthread_cleanup_push(exit_cleanup, me);
    result = start(arg);
    if (me)
        me->retval = result;
    pthread_cleanup_pop(0);
    unregister_self(result, true);
    tl_exited = true;
    return result;
}

LFGC_EXPORT int GC_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                                  void *(*start)(void *), void *arg)
{
    lf_ensure_init();
    thr.allow_register = true;
    struct start_info si = { .start = start, .arg = arg };
    int state = PTHREAD_CREATE_JOINABLE;
    if (attr)
        pthread_attr_getdetachstate(attr, &state);
    si.detached = state == PTHREAD_CREATE_DETACHED;
    sem_init(&si.registered, 0, 0);
    int err = pthread_create(thread, attr, thread_start, &si);
    /* Not cancelled in the wait: the new thread reads si, on this stack,
     * until it posts. */
    int cancel = nocancel_begin();
    if (err == 0)
        while (sem_wait(&si.registered) != 0 && errno == EINTR)
            ;
    nocancel_end(cancel);
    sem_destroy(&si.registered);
    return err;
}

static struct thread_rec *find_rec(pthread_t id)
{
    for (struct thread_rec *t = thr.registry; t; t = t->next)
        if (pthread_equal(t->id, id))
            return t;
    return NULL;
}

struct join_args {
    pthread_t thread;
    void *retval;           /* in this frame, scanned with the stack */
    int err;
};

static void *join_blocking(void *arg)
{
    struct join_args *a = arg;
    a->err = pthread_join(a->thread, &a->retval);
    return NULL;
}

LFGC_EXPORT int GC_pthread_join(pthread_t thread, void **retval)
{
    /* Find the record while the id still names this thread only: once
     * pthread_join returns, glibc may give the id to a new thread.  A
     * thread registered by its allocation leaves its record when it
     * exits, and another thread may register with it before the join
     * returns: the serial number tells. */
    lock();
    struct thread_rec *t = find_rec(thread);
    uint64_t serial = t ? t->serial : 0;
    unlock();
    /* A joining thread touches no heap object until it returns: like a
     * blocking call, it is not stopped (collections need not signal it
     * and wait for its answer), and its stack is scanned from here.  The
     * return value goes to the caller's variable (perhaps a heap object)
     * only once this thread runs again. */
    struct join_args a = {thread, NULL, 0};
    GC_do_blocking(join_blocking, &a);
    int err = a.err;
    if (err == 0 && t) {
        lock();
        if (t->serial == serial && state_of(t) == T_FINISHED)
            rec_unlink(t);
        unlock();
    }
    if (err == 0 && retval)
        *retval = a.retval;
    return err;
}

LFGC_EXPORT int GC_pthread_detach(pthread_t thread)
{
    lock();
    struct thread_rec *t = find_rec(thread);
    int err = pthread_detach(thread);
    if (err == 0 && t) {
        if (state_of(t) == T_FINISHED)
            rec_unlink(t);
        else
            t->detached = 1;
    }
    unlock();
    return err;
}

LFGC_EXPORT void GC_pthread_exit(void *retval)
{
    if (tl_self)
        tl_self->retval = retval;
    pthread_exit(retval);
}

LFGC_EXPORT int GC_pthread_cancel(pthread_t thread)
{
    return pthread_cancel(thread);
}

LFGC_EXPORT int GC_pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    if (!set || how == SIG_UNBLOCK)
        return pthread_sigmask(how, set, old);
    sigset_t fixed = *set;
    /* The collector must always be able to stop this thread. */
    sigdelset(&fixed, thr.sig_suspend);
    return pthread_sigmask(how, &fixed, old);
}

LFGC_EXPORT void *GC_dlopen(const char *path, int mode)
{
    lf_ensure_init();
    /* No collection while the library's data is half initialised. */
    GC_disable();
    void *h = dlopen(path, mode);
    GC_enable();
    return h;
}
