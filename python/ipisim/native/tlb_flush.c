/*
 * tlb_flush: the loops of will-it-scale's tests/tlb_flush1.c, tlb_flush2.c and tlb_flush3.c
 * (antonblanchard/will-it-scale) in thread mode, for a fixed number of iterations, to validate
 * ipisim's will-it-scale/tlb_flush* scenarios against this machine.
 *
 * Task i runs on CPU home + i (the main thread is task 0; pin it before exec). Each task maps
 * its own region: tlb_flush1 a MAP_PRIVATE file mapping, tlb_flush2 1 MiB of MAP_ANONYMOUS
 * memory, tlb_flush3 a MAP_SHARED file mapping (files: 128 MiB, mkstemp in /tmp, unlinked, as
 * the tests do; written once before the loop, the page cache a steady-state run would have).
 * One iteration: write a page, madvise(MADV_DONTNEED) that page, read it back; after the last
 * page, munmap and mmap again. Every task starts together and stops after `loops` iterations.
 * The /proc/interrupts TLB and CAL rows are read just before the start and after the last task
 * finished. Each repeat prints:
 *   loops=N ns=T cpu_ns=C tlb=a,b,... cal=a,b,...
 * (ns: wall time from the start to the last task's end; cpu_ns: mean CPU time of a task). Build: cc -O2 -pthread -o tlb_flush tlb_flush.c
 */
#define _GNU_SOURCE
#define PROGRAM "tlb_flush"
#include "common.h"
#include <sys/mman.h>

#define FILESIZE (128UL << 20)  /* tlb_flush1.c, tlb_flush3.c */
#define MEMORYSIZE (1UL << 20)  /* tlb_flush2.c */

static int test = 2;
static long loops = 10000;
static atomic_int go, ready;
static int fds[MAX_CPUS];

static void usage(void)
{
	fprintf(stderr, "usage: tlb_flush --test 1|2|3 --threads N --loops N [--repeats N]\n");
	exit(2);
}

/* The test file of task `i` (tlb_flush1/3): created once, like testcase()'s mkstemp. */
static int test_file(void)
{
	char path[] = "/tmp/willitscale.XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		die("mkstemp");
	unlink(path);
	static char zero[1 << 20];
	for (size_t off = 0; off < FILESIZE; off += sizeof(zero))
		if (pwrite(fd, zero, sizeof(zero), (off_t)off) != (ssize_t)sizeof(zero))
			die("pwrite");
	return fd;
}

static char *map(int i, size_t size)
{
	char *p = test == 2 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
		: mmap(NULL, size, PROT_READ | PROT_WRITE, test == 1 ? MAP_PRIVATE : MAP_SHARED, fds[i], 0);
	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

static double ended[MAX_CPUS], cpu_used[MAX_CPUS];

/* testcase() of tests/tlb_flush{1,2,3}.c, stopping after `loops` iterations. */
static void *task(void *arg)
{
	int i = (int)(intptr_t)arg;
	size_t size = test == 2 ? MEMORYSIZE : FILESIZE, pgsize = (size_t)getpagesize();
	atomic_fetch_add(&ready, 1);
	while (!atomic_load(&go))
		;
	long done = 0;
	double c0 = cpu_ns();
	while (done < loops) {
		char *c = map(i, size);
		for (size_t off = 0; off < size && done < loops; off += pgsize, done++) {
			c[off] = 1;
			madvise(c + off, pgsize, MADV_DONTNEED);
			if (c[off] != (test == 3 ? 1 : 0)) {
				fprintf(stderr, "tlb_flush: page not as the test asserts\n");
				exit(1);
			}
		}
		munmap(c, size);
	}
	ended[i] = now_ns();
	cpu_used[i] = cpu_ns() - c0;
	return NULL;
}

int main(int argc, char **argv)
{
	long threads = 2, repeats = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--test"))
			test = atoi(v);
		else if (!strcmp(a, "--threads"))
			threads = atol(v);
		else if (!strcmp(a, "--loops"))
			loops = atol(v);
		else if (!strcmp(a, "--repeats"))
			repeats = atol(v);
		else
			usage();
	}
	if (test < 1 || test > 3 || threads < 1 || loops < 1 || repeats < 1)
		usage();
	int ncpus;
	int home = pin_home(threads, "threads", threads, &ncpus);
	if (test != 2)
		for (long t = 0; t < threads; t++)
			fds[t] = test_file();

	static uint64_t tlb0[MAX_CPUS], cal0[MAX_CPUS], tlb1[MAX_CPUS], cal1[MAX_CPUS];
	if (!read_irq_rows(tlb0, cal0, ncpus)) {
		fprintf(stderr, "tlb_flush: /proc/interrupts has no TLB or CAL row\n");
		return 3;
	}
	for (long r = 0; r < repeats; r++) {
		atomic_store(&go, 0);
		atomic_store(&ready, 0);
		pthread_t tid[MAX_CPUS];
		for (long t = 1; t < threads; t++)
			tid[t] = spawn_on((int)((home + t) % ncpus), task, (void *)(intptr_t)t);
		while (atomic_load(&ready) < threads - 1)
			;
		read_irq_rows(tlb0, cal0, ncpus);
		double t0 = now_ns();
		atomic_store(&go, 1);
		task((void *)0);
		double last = ended[0], cpu = cpu_used[0];
		for (long t = 1; t < threads; t++) {
			pthread_join(tid[t], NULL);
			last = ended[t] > last ? ended[t] : last;
			cpu += cpu_used[t];
		}
		read_irq_rows(tlb1, cal1, ncpus);

		printf("loops=%ld ns=%.0f cpu_ns=%.0f ", loops, last - t0, cpu / threads);
		print_irq_deltas(tlb0, tlb1, cal0, cal1, ncpus);
	}
	return 0;
}
