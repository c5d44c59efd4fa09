/*
 * What the real-hardware programs (shootdown.c, membarrier.c, tlb_flush.c, costs.c) share:
 * errors, clocks, the TLB and CAL rows of /proc/interrupts (on riscv, OpenSBI's own counters of
 * remote fences instead), pinning, and the remote threads that spin or sleep. Each program
 * defines PROGRAM (its name) before including this file. hw.py compiles the program with this
 * header beside it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 1024

enum remote { R_BUSY, R_SLEEPING, R_NONE };

static atomic_int stop_flag; /* busy threads spin on it; sleeping threads futex-wait on it */
static atomic_int started;

static void die(const char *what)
{
	fprintf(stderr, PROGRAM ": %s: %s\n", what, strerror(errno));
	exit(1);
}

/* All of a /proc file with raw reads (no stdio buffering; procfs hands it out a page or a record
 * per read), in a buffer the next call reuses. */
static char *read_all(const char *path)
{
	static char buf[1 << 20];
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		die(path);
	size_t len = 0;
	ssize_t n;
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	if (n < 0)
		die(path);
	close(fd);
	buf[len] = 0;
	return buf;
}

/* The line after `line` in a buffer read_all() filled, or NULL at its end. */
static char *next_line(char *line)
{
	char *nl = strchr(line, '\n');
	return nl ? nl + 1 : NULL;
}

/* Parse the TLB and CAL rows of /proc/interrupts. */
static int read_irq_rows(uint64_t *tlb, uint64_t *cal, int ncpus)
{
	int found = 0;
	for (char *line = read_all("/proc/interrupts"); line && *line; line = next_line(line)) {
		char *p = line;
		while (*p == ' ')
			p++;
		uint64_t *row = !strncmp(p, "TLB:", 4) ? tlb : !strncmp(p, "CAL:", 4) ? cal : NULL;
		if (!row)
			continue;
		p += 4;
		for (int c = 0; c < ncpus; c++)
			row[c] = strtoull(p, &p, 10);
		found++;
	}
	return found == 2;
}

/* Print "tlb=..,.. cal=..,..\n": each CPU's TLB and CAL interrupts between two reads. */
static void print_irq_deltas(const uint64_t *tlb0, const uint64_t *tlb1, const uint64_t *cal0,
			     const uint64_t *cal1, int ncpus)
{
	printf("tlb=");
	for (int c = 0; c < ncpus; c++)
		printf("%s%llu", c ? "," : "", (unsigned long long)(tlb1[c] - tlb0[c]));
	printf(" cal=");
	for (int c = 0; c < ncpus; c++)
		printf("%s%llu", c ? "," : "", (unsigned long long)(cal1[c] - cal0[c]));
	printf("\n");
	fflush(stdout);
}

/* Run only on `cpu` from now on. */
static void pin_to(int cpu)
{
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		die("sched_setaffinity");
}

/* Stay on the CPU this program started on (hw.py pins it before exec) and return it; set *ncpus.
 * The program needs `need` CPUs for `count` `what`: with fewer, say so and exit 2. */
static int pin_home(long count, const char *what, long need, int *ncpus)
{
	*ncpus = (int)sysconf(_SC_NPROCESSORS_CONF);
	int home = sched_getcpu();
	if (*ncpus > MAX_CPUS || need > *ncpus) {
		fprintf(stderr, PROGRAM ": %ld %s need %ld CPUs; this machine has %d\n", count, what,
			need, *ncpus);
		exit(2);
	}
	pin_to(home);
	return home;
}

/* A thread running fn(arg), pinned to `cpu` from its start. */
static pthread_t spawn_on(int cpu, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_attr_init(&attr);
	pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	pthread_t tid;
	if (pthread_create(&tid, &attr, fn, arg))
		die("pthread_create");
	pthread_attr_destroy(&attr);
	return tid;
}

/* A remote thread of the process: spins in user space (busy) or blocks on a futex (sleeping). */
static __attribute__((unused)) void *remote_thread(void *arg)
{
	enum remote mode = (enum remote)(intptr_t)arg;
	atomic_fetch_add(&started, 1);
	if (mode == R_BUSY) {
		/* Keep other tasks from preempting the spinner, where we may: a CPU running some other
		 * mm is skipped by flush_tlb_multi() and is not in the membarrier mask, which would hide
		 * real IPIs from the count. */
		struct sched_param sp = { .sched_priority = 1 };
		pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
		while (!atomic_load_explicit(&stop_flag, memory_order_relaxed))
			;
	} else {
		while (!atomic_load(&stop_flag))
			syscall(SYS_futex, &stop_flag, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	}
	return NULL;
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Busy-wait `ns` of wall time on this CPU (it stays busy, unlike a sleep). */
static inline void spin_ns(double ns)
{
	for (double w = now_ns(); now_ns() - w < ns;)
		;
}

/* CPU time of the calling thread: what other tasks on its CPU (or the host) take is not in it. */
static double cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The SBI PMU's firmware events (SBI spec, "Firmware Events"), counted by OpenSBI on the hart
 * that sends or receives; perf's raw config 0b10 in bits 63:62 selects them
 * (drivers/perf/riscv_pmu_sbi.c, pmu_sbi_event_map()). */
static const struct {
	int code;
	const char *name;
} sbi_events[] = {
	{6, "ipi_sent"}, {7, "ipi_received"}, {10, "sfence_vma_sent"}, {11, "sfence_vma_received"},
	{12, "sfence_vma_asid_sent"}, {13, "sfence_vma_asid_received"},
};
#define NSBI (sizeof(sbi_events) / sizeof(sbi_events[0]))

static int sbi_fd[NSBI][MAX_CPUS];

static void sbi_open(int ncpus)
{
	for (size_t e = 0; e < NSBI; e++)
		for (int c = 0; c < ncpus; c++) {
			struct perf_event_attr a = {.size = sizeof(a), .type = PERF_TYPE_RAW};
			a.config = (2ULL << 62) | (unsigned)sbi_events[e].code;
			sbi_fd[e][c] = (int)syscall(SYS_perf_event_open, &a, -1, c, -1, 0);
			if (sbi_fd[e][c] < 0)
				die("perf_event_open(SBI firmware event)");
		}
}

/* Print each event's sum over the harts, "sbi NAME COUNT", and close its counters. */
static void sbi_print(int ncpus)
{
	for (size_t e = 0; e < NSBI; e++) {
		uint64_t sum = 0, v;
		for (int c = 0; c < ncpus; c++) {
			if (read(sbi_fd[e][c], &v, sizeof(v)) == sizeof(v))
				sum += v;
			close(sbi_fd[e][c]);
		}
		printf("sbi %s %llu\n", sbi_events[e].name, (unsigned long long)sum);
	}
}
