/* bench-netns-exec NETNS PROGRAM [ARG...]: run PROGRAM in the network
 * namespace NETNS (a path such as /run/netns/NAME), as `nsenter --net=NETNS`
 * does.  bench/agree charges each pod the CPU of its whole process, which
 * is also what ran before exec: nsenter, a dynamic executable, cost 1.2 ms
 * of it on the 2-core VM (a follower's whole figure was 11-13 ms), and this
 * launcher, static (musl), 0.15 ms.  In a pod the
 * container runtime execs nicpick directly, so the launcher stands for
 * nothing nicpick does; bench/agree prints its own cost beside the pods'. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bench-netns-exec NETNS PROGRAM [ARG...]\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "bench-netns-exec: %s: %s\n", argv[1], strerror(errno));
		return 125;
	}
	close(fd);
	execv(argv[2], argv + 2);
	fprintf(stderr, "bench-netns-exec: %s: %s\n", argv[2], strerror(errno));
	return 127;
}
