/*
 * shootdown: the `shootdown` scenario run for real, to validate ipisim against this machine.
 *
 * One thread on the CPU it was started on (pin it with taskset or sched_setaffinity before exec,
 * so that CPU is the only one the fresh mm ever ran on) maps `pages` private anonymous pages,
 * touches them, then applies `op` over them in calls of `batch` pages. `threads` other threads of
 * the process sit on the next CPUs, spinning in user space (busy) or blocked on a futex
 * (sleeping). The /proc/interrupts TLB and CAL rows are read just before the first call and just
 * after the last. Each repeat prints one line:
 *   syscalls=N ns=T cpu_ns=C tlb=a,b,... cal=a,b,...
 * (ns: wall time; cpu_ns: the calling thread's CPU time)
 * with per-CPU deltas. Build: cc -O2 -pthread -o shootdown shootdown.c
 */
#define _GNU_SOURCE
#define PROGRAM "shootdown"
#include "common.h"
#include <sys/mman.h>

#define PAGE 4096UL
#define PMD_SIZE (2UL << 20)

enum op { OP_MADVISE, OP_MUNMAP, OP_MPROTECT };

static void usage(void)
{
	fprintf(stderr, "usage: shootdown --op madvise|munmap|mprotect --pages N --batch N "
			"--remote busy|sleeping|none --threads N [--misalign] [--settle-ms N] "
			"[--repeats N]\n");
	exit(2);
}

/* A VMA of exactly `len` bytes starting on a 2 MiB boundary (or one page past it). */
static char *map_region(size_t len, int misalign)
{
	size_t slop = PMD_SIZE + PAGE;
	char *raw = mmap(NULL, len + slop, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		die("mmap");
	uintptr_t start = ((uintptr_t)raw + PMD_SIZE - 1) & ~(PMD_SIZE - 1);
	if (misalign)
		start += PAGE;
	if (start > (uintptr_t)raw && munmap(raw, start - (uintptr_t)raw))
		die("munmap head");
	uintptr_t end = (uintptr_t)raw + len + slop;
	if (end > start + len && munmap((char *)(start + len), end - start - len))
		die("munmap tail");
	/* ipisim models 4 KiB pages: keep THP from backing the region with one huge page. */
	if (madvise((char *)start, len, MADV_NOHUGEPAGE))
		die("madvise(MADV_NOHUGEPAGE)");
	return (char *)start;
}

int main(int argc, char **argv)
{
	enum op op = OP_MADVISE;
	enum remote remote = R_BUSY;
	long pages = 512, batch = 1, threads = 1, settle_ms = 50, repeats = 1;
	int misalign = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--misalign")) {
			misalign = 1;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--op"))
			op = !strcmp(v, "madvise") ? OP_MADVISE : !strcmp(v, "munmap") ? OP_MUNMAP
			   : !strcmp(v, "mprotect") ? OP_MPROTECT : (usage(), 0);
		else if (!strcmp(a, "--remote"))
			remote = !strcmp(v, "busy") ? R_BUSY : !strcmp(v, "sleeping") ? R_SLEEPING
			       : !strcmp(v, "none") ? R_NONE : (usage(), 0);
		else if (!strcmp(a, "--pages"))
			pages = atol(v);
		else if (!strcmp(a, "--batch"))
			batch = atol(v);
		else if (!strcmp(a, "--threads"))
			threads = atol(v);
		else if (!strcmp(a, "--settle-ms"))
			settle_ms = atol(v);
		else if (!strcmp(a, "--repeats"))
			repeats = atol(v);
		else
			usage();
	}
	if (pages < 1 || batch < 1 || threads < 0 || repeats < 1 || settle_ms < 0)
		usage();
	if (remote == R_NONE)
		threads = 0;

	int ncpus;
	int home = pin_home(threads, "remote threads", threads + 1, &ncpus);

	static uint64_t tlb0[MAX_CPUS], cal0[MAX_CPUS], tlb1[MAX_CPUS], cal1[MAX_CPUS];
	if (!read_irq_rows(tlb0, cal0, ncpus)) {
		fprintf(stderr, "shootdown: /proc/interrupts has no TLB or CAL row\n");
		return 3;
	}
	size_t len = (size_t)pages * PAGE;
	for (long r = 0; r < repeats; r++) {
		atomic_store(&stop_flag, 0);
		atomic_store(&started, 0);
		pthread_t tid[MAX_CPUS];
		for (long t = 0; t < threads; t++)
			tid[t] = spawn_on((int)((home + 1 + t) % ncpus), remote_thread, (void *)(intptr_t)remote);
		while (atomic_load(&started) < threads)
			;
		/* Let the remote CPU go idle first, then map and touch: the timed calls find the
		 * page tables and struct pages in the caches, as in the other cells and the model.
		 * Touching before a long wait measured other tenants' evictions instead (3x slower). */
		if (remote == R_SLEEPING && settle_ms > 0)
			spin_ns(settle_ms * 1e6);
		char *region = map_region(len, misalign);
		for (size_t off = 0; off < len; off += PAGE)
			region[off] = 1;

		long calls = 0;
		read_irq_rows(tlb0, cal0, ncpus);
		double t0 = now_ns(), c0 = cpu_ns();
		for (long next = 0; next < pages; next += batch, calls++) {
			char *addr = region + next * PAGE;
			size_t n = (size_t)(batch < pages - next ? batch : pages - next) * PAGE;
			int rc = op == OP_MADVISE ? madvise(addr, n, MADV_DONTNEED)
			       : op == OP_MUNMAP  ? munmap(addr, n)
						  : mprotect(addr, n, PROT_READ);
			if (rc)
				die("op");
		}
		double t1 = now_ns(), c1 = cpu_ns();
		read_irq_rows(tlb1, cal1, ncpus);

		atomic_store(&stop_flag, 1);
		syscall(SYS_futex, &stop_flag, FUTEX_WAKE_PRIVATE, MAX_CPUS, NULL, NULL, 0);
		for (long t = 0; t < threads; t++)
			pthread_join(tid[t], NULL);
		if (op != OP_MUNMAP)
			munmap(region, len);

		printf("syscalls=%ld ns=%.0f cpu_ns=%.0f ", calls, t1 - t0, c1 - c0);
		print_irq_deltas(tlb0, tlb1, cal0, cal1, ncpus);
	}
	return 0;
}
