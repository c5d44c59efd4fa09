/*
 * hackbench: the `hackbench` scenario's workload, run for real (examples/hackbench_guest.py boots
 * it under QEMU). As the 2012 tree's hackbench (perf bench sched messaging) in process mode:
 * `groups` groups of 20 receivers, each with its own socketpair, and 20 senders, each writing
 * `loops` 100-byte messages to every receiver of its group; all wait on a pipe until the parent
 * has forked every group, then run. A fork that fails stops the forking and the forked ones run.
 * Under the OOM killer: a sender whose receiver died dies of SIGPIPE, a receiver that lost a
 * sender waits for its messages, and if the parent dies the children, which hold the pipe's write
 * end too, wait forever (as in the original). The parent prints
 *   forked N ready N reaped N failed N Time: S
 * Build: cc -O2 -o hackbench hackbench.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define DATASIZE 100
#define NUM_FDS 20

static int loops = 100;

static void ready(int ready_out, int wakefd)
{
	char dummy = 0;
	struct pollfd p = {.fd = wakefd, .events = POLLIN};
	if (write(ready_out, &dummy, 1) != 1)
		_exit(1);
	if (poll(&p, 1, -1) != 1)
		_exit(1);
}

static void sender(int *out, int ready_out, int wakefd)
{
	char data[DATASIZE];
	memset(data, 'x', sizeof(data));
	ready(ready_out, wakefd);
	for (int i = 0; i < loops; i++)
		for (int j = 0; j < NUM_FDS; j++) {
			int done = 0;
			while (done < DATASIZE) {
				int r = write(out[j], data + done, DATASIZE - done);
				if (r <= 0)
					_exit(1);
				done += r;
			}
		}
	_exit(0);
}

static void receiver(int in, int ready_out, int wakefd)
{
	char data[DATASIZE];
	long want = (long)loops * NUM_FDS * DATASIZE;
	ready(ready_out, wakefd);
	while (want > 0) {
		int r = read(in, data, DATASIZE);
		if (r <= 0)
			_exit(1);
		want -= r;
	}
	_exit(0);
}

static int forked;

/* fork(): 0 in the child, 1 in the parent, -1 (said on stderr) if it failed. */
static int fork_child(void)
{
	pid_t p = fork();
	if (p < 0) {
		fprintf(stderr, "fork: %s\n", strerror(errno));
		return -1;
	}
	forked += p > 0;
	return p > 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: hackbench GROUPS [LOOPS] (GROUPS 1..100000, LOOPS 1..1000000)\n");
	return 2;
}

int main(int argc, char **argv)
{
	char *end = "";
	long groups = argc == 2 || argc == 3 ? strtol(argv[1], &end, 10) : 0;
	if (*end || groups < 1 || groups > 100000)
		return usage();
	loops = argc == 3 ? (int)strtol(argv[2], &end, 10) : 100;
	if (*end || loops < 1 || loops > 1000000)
		return usage();
	int readyfds[2], wakefds[2];
	if (pipe(readyfds) || pipe(wakefds))
		return 1;
	for (long g = 0; g < groups; g++) {
		int out[NUM_FDS];
		for (int i = 0; i < NUM_FDS; i++) {
			int fds[2];
			if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds)) {
				fprintf(stderr, "socketpair: %s\n", strerror(errno));
				goto start;
			}
			int c = fork_child();
			if (c == 0)
				receiver(fds[0], readyfds[1], wakefds[0]);
			close(fds[0]);
			out[i] = fds[1];
			if (c < 0)
				goto start;
		}
		for (int i = 0; i < NUM_FDS; i++) {
			int c = fork_child();
			if (c == 0)
				sender(out, readyfds[1], wakefds[0]);
			if (c < 0)
				goto start;
		}
		for (int i = 0; i < NUM_FDS; i++)
			close(out[i]);
	}
start:
	close(readyfds[1]);
	{
		char dummy;
		int n = 0;
		while (n < forked && read(readyfds[0], &dummy, 1) == 1)
			n++;
		struct timeval t0, t1;
		gettimeofday(&t0, NULL);
		if (write(wakefds[1], &dummy, 1) != 1)
			return 1;
		int st, failed = 0, reaped = 0;
		while (wait(&st) > 0) {
			reaped++;
			failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
		gettimeofday(&t1, NULL);
		printf("forked %d ready %d reaped %d failed %d Time: %.3f\n", forked, n, reaped, failed,
		       (t1.tv_sec - t0.tv_sec) + (t1.tv_usec - t0.tv_usec) / 1e6);
	}
	return 0;
}
