/* malloc_exec.c: a real program as a malloc-mode workload.
 *
 *   malloc_exec NAME EXPECTED -- PROGRAM [ARGS...]
 *   malloc_exec NAME print    -- PROGRAM [ARGS...]
 *
 * Runs PROGRAM (found on PATH) with the environment it was given, so that
 * the allocator preloaded for this run (LD_PRELOAD) is the program's and
 * its children's, reads its standard output and hashes it (64-bit FNV-1a),
 * waits for it, and prints the RESULT line with the program's wall time,
 * CPU time and peak RSS (of its largest process, from wait4).  The run
 * passes when the program exits with status 0 and its output hashes to
 * EXPECTED (16 hex digits): the output it gave with glibc's malloc,
 * recorded by the bench script with `print` before the runs.
 *
 * Extra RESULT fields: out_bytes, out_hash.
 */
#include "malloc_util.h"
#include <errno.h>
#include <inttypes.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: malloc_exec NAME EXPECTED|print -- PROGRAM "
                "[ARGS...]\n");
        return 2;
    }
    const char *name = argv[1], *expected = argv[2];
    int print = strcmp(expected, "print") == 0;
    int fd[2];
    if (pipe(fd) != 0) {
        perror("malloc_exec: pipe");
        return 3;
    }
    uint64_t t0 = bench_now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        perror("malloc_exec: fork");
        return 3;
    }
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execvp(argv[4], argv + 4);
        fprintf(stderr, "malloc_exec: cannot run %s: %s\n", argv[4],
                strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    uint64_t h = 1469598103934665603ULL, bytes = 0;
    unsigned char buf[65536];
    for (;;) {
        ssize_t n = read(fd[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            h ^= buf[i];
            h *= 1099511628211ULL;
        }
        bytes += (uint64_t)n;
    }
    close(fd[0]);
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("malloc_exec: wait4");
            return 3;
        }
    }
    double wall = (double)(bench_now_ns() - t0) / 1e9;
    double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    char hash[17];
    snprintf(hash, sizeof hash, "%016" PRIx64, h);
    int exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!exited_ok) {
        if (WIFSIGNALED(status))
            fprintf(stderr, "malloc_exec: %s killed by signal %d\n", argv[4],
                    WTERMSIG(status));
        else
            fprintf(stderr, "malloc_exec: %s exited with status %d\n",
                    argv[4], WEXITSTATUS(status));
    }
    if (print) {
        if (!exited_ok)
            return 1;
        printf("%s\n", hash);
        return 0;
    }
    int same = strcmp(hash, expected) == 0;
    if (exited_ok && !same)
        fprintf(stderr, "malloc_exec: %s: output differs from glibc's "
                "(hash %s, expected %s, %" PRIu64 " bytes)\n", name, hash,
                expected, bytes);
    printf("RESULT workload=%s wall_s=%.3f cpu_s=%.3f peak_rss_kb=%ld "
           "out_bytes=%" PRIu64 " out_hash=%s check=%s\n", name, wall, cpu,
           ru.ru_maxrss, bytes, hash, exited_ok && same ? "ok" : "FAIL");
    return exited_ok && same ? 0 : 1;
}
