/*
 * bench_insns.c - counts the user-mode instructions a program executes between
 * two markers (it raises SIGSTOP before and after the work), by single-stepping
 * it under ptrace. Repeatable under any load and for every ISA: valgrind
 * (3.19) hides AVX-512 from the program and there are no hardware counters in
 * this VM, so this is how kernel changes are measured here.
 *   bench_insns PROGRAM [ARGS...]   (bench_gemm marks its work with KT_BENCH_MARK=1)
 * Counts the traced thread only: run the work on one thread.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_insns PROGRAM [ARGS...]\n");
        return 2;
    }
    setenv("KT_BENCH_MARK", "1", 1);
    const pid_t pid = fork();
    if (pid < 0) return perror("fork"), 1;
    if (pid == 0) {
        ptrace(PTRACE_TRACEME, 0, NULL, NULL);
        execvp(argv[1], argv + 1);
        perror(argv[1]);
        _exit(127);
    }
    int st, marks = 0;
    long long n = 0;
    /* the exec stop, then run to the first marker; count steps until the second */
    if (waitpid(pid, &st, 0) < 0 || !WIFSTOPPED(st)) return fprintf(stderr, "bench_insns: %s did not start\n", argv[1]), 1;
    ptrace(PTRACE_CONT, pid, NULL, NULL);
    for (;;) {
        if (waitpid(pid, &st, 0) < 0) return perror("waitpid"), 1;
        if (WIFEXITED(st) || WIFSIGNALED(st)) break;
        const int sig = WSTOPSIG(st);
        if (sig == SIGSTOP) {
            if (++marks == 2) {
                printf("%lld instructions\n", n);
                fflush(stdout);
                ptrace(PTRACE_CONT, pid, NULL, NULL);
                continue;
            }
            ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL);
            continue;
        }
        if (marks == 1 && sig == SIGTRAP) {
            n++;
            ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL);
            continue;
        }
        ptrace(PTRACE_CONT, pid, NULL, (void *)(long)(sig == SIGTRAP ? 0 : sig));
    }
    if (marks < 2) return fprintf(stderr, "bench_insns: %s set %d of 2 markers (KT_BENCH_MARK)\n", argv[1], marks), 1;
    return 0;
}
