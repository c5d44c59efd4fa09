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
 *
 * --reclaimer kswapd: instead of memory.reclaim, the parent raises vm.watermark_scale_factor to
 * its maximum and vm.min_free_kbytes until every zone's free memory is under its low watermark,
 * one zone's above its min, with the high ones out of reach, and faults in one page: that wakes
 * kswapd (wake_all_kswapds() in the slow path) and succeeds above min, so no task reclaims
 * directly. kswapd then reclaims all it can (then gives up: kswapd_failures); the parent waits
 * until pgsteal_kswapd in /proc/vmstat stops moving and puts both sysctls back.
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
			" --memory file|anon --cgroup DIR [--reclaimer direct|kswapd] [--dir DIR]"
			" [--repeats N]\n");
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
	pin_to(i);
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

static void write_long(const char *path, long v)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%ld", v);
	write_file(path, buf);
}

/* A /proc/meminfo or /proc/vmstat value ("Name: N" or "name N"). */
static long read_stat(const char *path, const char *name)
{
	size_t len = strlen(name);
	for (char *l = read_all(path); l; l = next_line(l))
		if (!strncmp(l, name, len) && (l[len] == ' ' || l[len] == ':'))
			return atol(l + len + 1);
	fprintf(stderr, PROGRAM ": %s has no %s\n", path, name);
	exit(3);
}

#define WSF "/proc/sys/vm/watermark_scale_factor"
#define MIN_FREE "/proc/sys/vm/min_free_kbytes"

/* The largest free share of a zone (free / managed pages, from /proc/zoneinfo), and the managed
 * pages of all zones (x86-64 has no highmem: all count as lowmem). */
static double max_free_share(long *managed_total)
{
	char *buf = read_all("/proc/zoneinfo");
	double best = 0;
	long free = 0, managed;
	*managed_total = 0;
	for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
		if (sscanf(l, " pages free %ld", &free) == 1)
			continue;
		if (sscanf(l, " managed %ld", &managed) == 1 && managed > 0) {
			*managed_total += managed;
			if ((double)free / managed > best)
				best = (double)free / managed;
		}
	}
	return best;
}

/* Wake kswapd with free memory under the low watermark of every zone, wait for it to finish. */
static void kswapd_reclaim(void)
{
	long wsf0 = atol(read_all(WSF)), min0 = atol(read_all(MIN_FREE)), managed;
	/* 6.1 __setup_per_zone_wmarks(): a zone's min is its share (by managed pages) of
	 * min_free_kbytes, low = min + tmp and high = min + 2 tmp, tmp 30 % of the zone at
	 * watermark_scale_factor 3000. With min at the largest free share less 28 %, every zone's
	 * free memory is under its low watermark (else the fault takes its page there, in the fast
	 * path) and over min in that zone, and high is out of reach in all (wakeup_kswapd() returns
	 * at once for a node with one balanced zone). */
	double share = max_free_share(&managed) - 0.28;
	write_long(WSF, 3000);
	write_long(MIN_FREE, (long)(share * managed) * 4);
	volatile char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				   -1, 0);
	if (page == MAP_FAILED)
		die("mmap");
	page[0] = 1;
	long last = -1, steal;
	for (int same = 0; same < 20; usleep(50000)) {
		steal = read_stat("/proc/vmstat", "pgsteal_kswapd");
		same = steal == last ? same + 1 : 0;
		last = steal;
	}
	write_long(MIN_FREE, min0);
	write_long(WSF, wsf0);
	munmap((void *)page, 4096);
}

int main(int argc, char **argv)
{
	const char *dir = "/mnt", *cgroup = NULL, *remote = "busy", *memory = "file";
	const char *reclaimer = "direct";
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
		else if (!strcmp(a, "--reclaimer"))
			reclaimer = v;
		else if (!strcmp(a, "--repeats"))
			repeats = atol(v);
		else
			usage();
	}
	int busy = !strcmp(remote, "busy"), anon = !strcmp(memory, "anon");
	int kswapd = !strcmp(reclaimer, "kswapd");
	if (argc % 2 == 0 || processes < 1 || pages < 1 || repeats < 1 || !cgroup ||
	    (!busy && strcmp(remote, "sleeping")) || (!anon && strcmp(memory, "file")) ||
	    (!kswapd && strcmp(reclaimer, "direct")))
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
		if (kswapd)
			kswapd_reclaim();
		else /* -EAGAIN when less than asked could be reclaimed: those that were count. */
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
