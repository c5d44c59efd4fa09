/*
 * migrate: the `migrate` scenario run for real (in a `validate --qemu` guest with 2 NUMA nodes).
 *
 * A child process's `threads` threads, thread i pinned to CPU i, each write their share of one
 * private anonymous region (first touch: its pages land on the thread's node), wait for the
 * others, then load and store (`write-percent` % stores) at random pages of all of it until told
 * to stop. The parent, pinned to the last CPU, calls migrate_pages(2) on the child `passes`
 * times, node 0 -> 1, then 1 -> 0, ... The /proc/interrupts TLB and CAL rows are read just
 * before the first call and just after the last. Per repeat:
 *   syscalls=N ns=T cpu_ns=C tlb=a,b,... cal=a,b,...
 * (syscalls: migrate_pages calls), and the child's pages per node before and after (numa_maps).
 * With --sbi 1 (riscv, which has no TLB row) OpenSBI's remote-fence counters replace the rows:
 * "sbi NAME COUNT" lines over the passes.
 * Build: cc -O2 -pthread -o migrate migrate.c
 */
#define _GNU_SOURCE
#define PROGRAM "migrate"
#include "common.h"
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#define PAGE 4096UL

static void usage(void)
{
	fprintf(stderr, "usage: migrate --threads N --bytes B [--write-percent P] [--passes N] "
			"[--repeats N] [--sbi 1]\n");
	exit(2);
}

struct shared {
	atomic_int populated;
	atomic_int go;
	atomic_int stop;
};

static struct shared *sh;
static char *region;
static size_t npages;
static long nthreads, write_percent;

static void *worker(void *arg)
{
	long i = (long)(intptr_t)arg;
	size_t lo = npages * (size_t)i / (size_t)nthreads, hi = npages * (size_t)(i + 1) / (size_t)nthreads;
	for (size_t p = lo; p < hi; p++)
		region[p * PAGE] = 1;
	atomic_fetch_add(&sh->populated, 1);
	while (!atomic_load(&sh->go))
		;
	uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1), sum = 0;
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		for (int k = 0; k < 1024; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
			volatile char *c = region + (x % npages) * PAGE;
			if ((long)((x >> 40) % 100) < write_percent)
				*c = (char)x;
			else
				sum += (uint64_t)*c;
		}
	}
	return (void *)(uintptr_t)sum;
}

/* From /proc/PID/numa_maps: the pages of the region and of everything else on nodes 0 and 1.
 * Printed (as a line the validation skips) before the first pass and after the last. */
static void numa_pages(pid_t pid, const char *when)
{
	char path[64], line[4096];
	long n[2][2] = { { 0, 0 }, { 0, 0 } };
	snprintf(path, sizeof(path), "/proc/%d/numa_maps", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		int which = strtoull(line, NULL, 16) != (uintptr_t)region;
		for (int node = 0; node < 2; node++) {
			char key[8];
			snprintf(key, sizeof(key), " N%d=", node);
			char *k = strstr(line, key);
			if (k)
				n[which][node] += atol(k + strlen(key));
		}
	}
	fclose(f);
	fprintf(stderr, "numa %s: region N0=%ld N1=%ld, other pages N0=%ld N1=%ld\n", when, n[0][0],
		n[0][1], n[1][0], n[1][1]);
}

static void child(void)
{
	/* ipisim models 4 KiB pages: no transparent huge pages anywhere in the process (thread
	 * stacks included). */
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0))
		die("prctl(PR_SET_THP_DISABLE)");
	region = mmap(region, npages * PAGE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (region == MAP_FAILED)
		die("mmap");
	pthread_t tid[MAX_CPUS];
	for (long t = 0; t < nthreads; t++)
		tid[t] = spawn_on((int)t, worker, (void *)(intptr_t)t);
	for (long t = 0; t < nthreads; t++)
		pthread_join(tid[t], NULL);
	_exit(0);
}

int main(int argc, char **argv)
{
	long passes = 4, repeats = 1, sbi = 0;
	long long bytes = 0;
	write_percent = 50;
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];
		if (!strcmp(a, "--threads"))
			nthreads = atol(v);
		else if (!strcmp(a, "--bytes"))
			bytes = atoll(v);
		else if (!strcmp(a, "--write-percent"))
			write_percent = atol(v);
		else if (!strcmp(a, "--passes"))
			passes = atol(v);
		else if (!strcmp(a, "--repeats"))
			repeats = atol(v);
		else if (!strcmp(a, "--sbi"))
			sbi = atol(v);
		else
			usage();
	}
	npages = (size_t)bytes / PAGE;
	if (argc % 2 == 0 || nthreads < 1 || npages < (size_t)nthreads || passes < 1 || repeats < 1)
		usage();
	int ncpus;
	pin_home(nthreads, "threads and migratepages", nthreads + 1, &ncpus);
	/* migratepages on the last CPU. */
	pin_to(ncpus - 1);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap shared");
	static uint64_t tlb0[MAX_CPUS], cal0[MAX_CPUS], tlb1[MAX_CPUS], cal1[MAX_CPUS];
	for (long r = 0; r < repeats; r++) {
		atomic_store(&sh->populated, 0);
		atomic_store(&sh->go, 0);
		atomic_store(&sh->stop, 0);
		/* Reserve the region's address in the parent, so it knows where the child maps it;
		 * the child replaces it with its own (MAP_FIXED) after fork. */
		region = mmap(NULL, npages * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (region == MAP_FAILED)
			die("mmap");
		/* Fork on CPU 0, where thread 0 runs: the child's mm is loaded on no CPU of its own (on
		 * riscv with ASIDs a CPU keeps its bit in mm_cpumask for good), as the model starts it. */
		pin_to(0);
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0)
			child();
		pin_to(ncpus - 1);
		while (atomic_load(&sh->populated) < nthreads)
			usleep(1000);
		numa_pages(pid, "before");
		atomic_store(&sh->go, 1);
		if (sbi)
			sbi_open(ncpus);
		else if (!read_irq_rows(tlb0, cal0, ncpus)) {
			fprintf(stderr, PROGRAM ": /proc/interrupts has no TLB or CAL row\n");
			return 3;
		}
		double t0 = now_ns(), c0 = cpu_ns();
		for (long p = 0; p < passes; p++) {
			unsigned long from = 1UL << (p % 2), to = 1UL << (1 - p % 2);
			long left = syscall(SYS_migrate_pages, pid, 8 * sizeof(unsigned long), &from, &to);
			if (left < 0)
				die("migrate_pages");
		}
		double t1 = now_ns(), c1 = cpu_ns();
		if (!sbi)
			read_irq_rows(tlb1, cal1, ncpus);
		numa_pages(pid, "after");
		atomic_store(&sh->stop, 1);
		int st;
		if (waitpid(pid, &st, 0) < 0)
			die("waitpid");
		munmap(region, npages * PAGE);
		printf("syscalls=%ld ns=%.0f cpu_ns=%.0f ", passes, t1 - t0, c1 - c0);
		if (sbi) {
			printf("\n");
			sbi_print(ncpus);
		} else {
			print_irq_deltas(tlb0, tlb1, cal0, cal1, ncpus);
		}
	}
	return 0;
}
