/*
 * reclaim: the `reclaim` scenario's microbenchmark, run for real (in the `validate --qemu` guest).
 *
 * `processes` processes, process i pinned to CPU i (1..N), each join the memory cgroup `cgroup`,
 * then, one after another (the scenario's `touch = in_turn`: each one's pages lie together on the
 * LRU, however the host schedules the vCPUs), map `pages` pages and touch each once: their own
 * sparse file in `dir` (MAP_SHARED,
 * PROT_READ, one read a page: clean page cache, --memory file) or private anonymous memory (one
 * write a page, --memory anon: swapped out, so the guest needs swap). Then they spin in user space
 * (--remote busy; SCHED_OTHER, so the kworker of lru_add_drain_all() still runs there) or sleep
 * (--remote sleeping). The parent, on CPU 0, writes the pages' size to the cgroup's memory.reclaim
 * (6.1: try_to_free_mem_cgroup_pages() in the writer: direct reclaim, as the scenario's reclaimer
 * on CPU 0), reading the TLB and CAL rows of /proc/interrupts before and after. It then kills the
 * processes and prints per repeat:
 *   syscalls=N ns=T cpu_ns=C tlb=a,b,... cal=a,b,...
 * (syscalls: processes; ns: wall time of the memory.reclaim write). Build: cc -O2 -o reclaim
 * reclaim.c
 */
#define _GNU_SOURCE
#define PROGRAM "reclaim"
#include "common.h"
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

static void usage(void)
{
	fprintf(stderr, "usage: reclaim --processes N --pages P --remote busy|sleeping"
			" --memory file|anon --cgroup DIR [--dir DIR] [--repeats N]\n");
	exit(2);
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		die(path);
	if (write(fd, text, strlen(text)) < 0 && errno != EAGAIN)
		die(path);
	close(fd);
}

/* Process i: join the cgroup, wait for its turn on `turn`, fault in its pages, hand the turn on
 * to `next` (-1: none) and say so on `ready`, then spin or sleep. */
static void process(int i, const char *dir, const char *cgroup, long pages, int anon, int busy,
		    int turn, int next, int ready)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(i, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		die("sched_setaffinity");
	char path[4096];
	snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
	write_file(path, "0");
	char c;
	if (read(turn, &c, 1) != 1)
		die("read turn");
	size_t bytes = (size_t)pages * 4096;
	volatile char *p;
	if (anon) {
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	} else {
		snprintf(path, sizeof(path), "%s/reclaim-%d", dir, i);
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || ftruncate(fd, (off_t)bytes))
			die(path);
		p = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
	}
	if (p == MAP_FAILED)
		die("mmap");
	unsigned sum = 0;
	for (size_t off = 0; off < bytes; off += 4096) {
		if (anon)
			p[off] = 1;
		else
			sum += (unsigned char)p[off];
	}
	c = (char)sum;
	if ((next >= 0 && write(next, &c, 1) != 1) || write(ready, &c, 1) != 1)
		die("write turn");
	for (;;)
		if (!busy)
			pause();
}

int main(int argc, char **argv)
{
	const char *dir = "/mnt", *cgroup = NULL, *remote = "busy", *memory = "file";
	long processes = 0, pages = 0, repeats = 1;
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];
		if (!strcmp(a, "--processes"))
			processes = atol(v);
		else if (!strcmp(a, "--pages"))
			pages = atol(v);
		else if (!strcmp(a, "--remote"))
			remote = v;
		else if (!strcmp(a, "--memory"))
			memory = v;
		else if (!strcmp(a, "--cgroup"))
			cgroup = v;
		else if (!strcmp(a, "--dir"))
			dir = v;
		else if (!strcmp(a, "--repeats"))
			repeats = atol(v);
		else
			usage();
	}
	int busy = !strcmp(remote, "busy"), anon = !strcmp(memory, "anon");
	if (argc % 2 == 0 || processes < 1 || pages < 1 || repeats < 1 || !cgroup ||
	    (!busy && strcmp(remote, "sleeping")) || (!anon && strcmp(memory, "file")))
		usage();
	int ncpus;
	pin_home(processes, "processes", processes + 1, &ncpus);
	char reclaim_path[4096], amount[64];
	snprintf(reclaim_path, sizeof(reclaim_path), "%s/memory.reclaim", cgroup);
	snprintf(amount, sizeof(amount), "%lld", (long long)processes * pages * 4096);
	static uint64_t tlb0[MAX_CPUS], cal0[MAX_CPUS], tlb1[MAX_CPUS], cal1[MAX_CPUS];
	for (long r = 0; r < repeats; r++) {
		int ready[2], turn[MAX_CPUS][2];
		if (pipe(ready))
			die("pipe");
		for (int i = 0; i < processes; i++)
			if (pipe(turn[i]))
				die("pipe");
		pid_t pid[MAX_CPUS];
		for (int i = 0; i < processes; i++) {
			pid[i] = fork();
			if (pid[i] < 0)
				die("fork");
			if (pid[i] == 0)
				process(i + 1, dir, cgroup, pages, anon, busy, turn[i][0],
					i + 1 < processes ? turn[i + 1][1] : -1, ready[1]);
		}
		if (write(turn[0][1], "", 1) != 1)
			die("write turn");
		for (int i = 0; i < processes; i++) {
			char c;
			if (read(ready[0], &c, 1) != 1) {
				fprintf(stderr, PROGRAM ": a process failed before its pages were in\n");
				return 1;
			}
		}
		close(ready[0]);
		close(ready[1]);
		for (int i = 0; i < processes; i++)
			close(turn[i][0]), close(turn[i][1]);
		if (!read_irq_rows(tlb0, cal0, ncpus)) {
			fprintf(stderr, PROGRAM ": /proc/interrupts has no TLB or CAL row\n");
			return 3;
		}
		double t0 = now_ns(), c0 = cpu_ns();
		/* -EAGAIN when less than asked could be reclaimed: the pages that were are counted. */
		write_file(reclaim_path, amount);
		double t1 = now_ns(), c1 = cpu_ns();
		read_irq_rows(tlb1, cal1, ncpus);
		for (int i = 0; i < processes; i++) {
			kill(pid[i], SIGKILL);
			waitpid(pid[i], NULL, 0);
			char path[4096];
			snprintf(path, sizeof(path), "%s/reclaim-%d", dir, i + 1);
			unlink(path);
		}
		printf("syscalls=%ld ns=%.0f cpu_ns=%.0f ", processes, t1 - t0, c1 - c0);
		print_irq_deltas(tlb0, tlb1, cal0, cal1, ncpus);
	}
	return 0;
}
