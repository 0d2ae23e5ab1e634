/* fork_cases.c: forks that must not deadlock, run by test_malloc with
 * liblfgc-malloc preloaded into a fresh process (so that it is single-
 * or multi-threaded as the case says).  Prints "ok" and exits 0; a
 * deadlock ends in SIGALRM.  Linked with nothing but the C library.
 *
 *   fork_cases stdio     threads fork while others run getline (which
 *                        reallocates under its stream's lock) and
 *                        fflush(NULL) (which takes every stream's lock
 *                        under stdio's list lock): glibc's bug 19431
 *   fork_cases handler   one thread allocating and freeing large blocks,
 *                        a signal handler that forks wherever the signal
 *                        lands, inside malloc and free included
 *                        (for 1.5 s each) */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static char path[64];

static void fork_and_reap(void)
{
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    if (p > 0)
        waitpid(p, NULL, 0);
}

static void *forker(void *arg)
{
    while (!stop)
        fork_and_reap();
    return arg;
}

static void *reader(void *arg)
{
    FILE *f = fopen(path, "r");
    if (!f)
        abort();
    while (!stop) {
        char *line = NULL;
        size_t n = 0;
        rewind(f);
        if (getline(&line, &n, f) < 0)
            abort();
        free(line);
    }
    fclose(f);
    return arg;
}

static void *flusher(void *arg)
{
    while (!stop)
        fflush(NULL);
    return arg;
}

static int stdio_case(void)
{
    snprintf(path, sizeof path, "/tmp/lfgc-fork-cases.%d", (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    for (int i = 0; i < 50000; i++)     /* getline reallocates as it reads */
        fputc('x', f);
    fputc('\n', f);
    fclose(f);
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, i < 2 ? forker : i < 7 ? reader : flusher, NULL);
    usleep(1500 * 1000);                /* 1.5 s */
    stop = 1;
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    unlink(path);
    return 0;
}

static void on_prof(int sig)
{
    (void)sig;
    fork_and_reap();
}

/* Through a volatile pointer, or the compiler drops the pair. */
static void *volatile sink;

static int handler_case(void)
{
    signal(SIGPROF, on_prof);
    struct itimerval it = {{0, 200}, {0, 200}};     /* every 200 us of CPU */
    setitimer(ITIMER_PROF, &it, NULL);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long i = 0;
    do {                                            /* for 1.5 s */
        for (int k = 0; k < 1024; k++, i++) {
            sink = malloc(40000 + (size_t)(i % 64));    /* large: the locked path */
            free(sink);
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 1500);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    alarm(20);
    int r = argc == 2 && !strcmp(argv[1], "stdio")     ? stdio_case()
            : argc == 2 && !strcmp(argv[1], "handler") ? handler_case()
                                                       : 2;
    if (r == 0)
        puts("ok");
    return r;
}
