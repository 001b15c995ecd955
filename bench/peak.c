/* bench-peak FD PROGRAM [ARG...]: run PROGRAM and write its own peak RSS
 * and CPU to the open file descriptor FD, as one line "MAXRSS_KIB USER_S
 * SYS_S"; exit as PROGRAM did (128 + the signal that ended it).
 *
 * Why not wait4(2) on PROGRAM from the benchmark itself: a child's
 * ru_maxrss includes the memory of the process it was forked from.  Linux
 * copies the parent's resident pages into the child's counters at fork,
 * and exec records the old mm's high-water mark in the process's maxrss
 * before it drops it (fs/exec.c, exec_mmap: setmax_mm_hiwater_rss), so a
 * benchmark that has seeded 16,384 pods of 14 KB forks children that
 * "peak" at its own 200 MiB whatever they use.  This launcher is static
 * (musl) and small: PROGRAM is forked from it, so PROGRAM's figure is its
 * own.  SIGTERM, SIGINT and SIGHUP are passed on to PROGRAM. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t child;

static void pass_on(int sig)
{
	if (child > 0)
		kill(child, sig);
}

int main(int argc, char **argv)
{
	char *end;
	long fd = argc >= 3 ? strtol(argv[1], &end, 10) : -1;
	if (argc < 3 || *end || fd < 0 || fd > 1023) {
		fprintf(stderr, "usage: bench-peak FD PROGRAM [ARG...]\n");
		return 2;
	}
	/* Held until the child's pid is known, so that none is lost. */
	sigset_t passed, before;
	sigemptyset(&passed);
	struct sigaction sa = { .sa_handler = pass_on };
	sigemptyset(&sa.sa_mask);
	for (int s = 0; s < 3; s++) {
		int sig = (int[]){ SIGTERM, SIGINT, SIGHUP }[s];
		sigaddset(&passed, sig);
		sigaction(sig, &sa, NULL);
	}
	sigprocmask(SIG_BLOCK, &passed, &before);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "bench-peak: fork: %s\n", strerror(errno));
		return 125;
	}
	if (pid == 0) {
		close((int)fd);
		sa.sa_handler = SIG_DFL;
		for (int s = 0; s < 3; s++)
			sigaction((int[]){ SIGTERM, SIGINT, SIGHUP }[s], &sa, NULL);
		sigprocmask(SIG_SETMASK, &before, NULL);
		execv(argv[2], argv + 2);
		fprintf(stderr, "bench-peak: %s: %s\n", argv[2], strerror(errno));
		_exit(127);
	}
	child = pid;
	sigprocmask(SIG_SETMASK, &before, NULL);
	int st;
	struct rusage ru;
	while (wait4(pid, &st, 0, &ru) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "bench-peak: wait4: %s\n", strerror(errno));
			return 125;
		}
	dprintf((int)fd, "%ld %ld.%06ld %ld.%06ld\n", ru.ru_maxrss, (long)ru.ru_utime.tv_sec,
		(long)ru.ru_utime.tv_usec, (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
