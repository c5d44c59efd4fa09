/*
 * costs: measure, on this machine, the per-operation costs of the host-2cpu profile's [cost]
 * table that user space can see. Run pinned to CPU 0 (a second CPU is used for the IPI test).
 * Prints `name ns` lines; docs/hardware-shootdown.md says how each becomes a cost entry.
 * Build: cc -O2 -pthread -o costs costs.c (with common.h beside it)
 */
#define _GNU_SOURCE
#define PROGRAM "costs"
#include "common.h"
#include <linux/membarrier.h>
#include <sys/mman.h>

#define PAGE 4096UL
#define BIG_PAGES 16384UL /* 64 MiB: more pages than the TLB holds */

static char *map(size_t pages)
{
	char *p = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	madvise(p, pages * PAGE, MADV_NOHUGEPAGE);
	return p;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median of v[0..n): robust to the calls during which the host descheduled a vCPU. */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static double best_of(int n, double (*f)(void))
{
	double best = 1e300;
	for (int i = 0; i < n; i++) {
		double v = f();
		best = v < best ? v : best;
	}
	return best;
}

static double null_syscall(void)
{
	double t = now_ns();
	for (int i = 0; i < 200000; i++)
		syscall(SYS_getppid);
	return (now_ns() - t) / 200000;
}

static volatile char sink;

/* First touch of fresh anonymous pages: fault, clear_page, map, plus the store. */
static double first_touch(void)
{
	char *p = map(BIG_PAGES);
	double t = now_ns();
	for (size_t i = 0; i < BIG_PAGES; i++)
		p[i * PAGE] = 1;
	double ns = (now_ns() - t) / BIG_PAGES;
	munmap(p, BIG_PAGES * PAGE);
	return ns;
}

static char *big_a, *big_b;

static double page_clear(void)
{
	double t = now_ns();
	for (size_t i = 0; i < BIG_PAGES; i++)
		memset(big_a + i * PAGE, 0, PAGE);
	return (now_ns() - t) / BIG_PAGES;
}

static double page_copy(void)
{
	double t = now_ns();
	for (size_t i = 0; i < BIG_PAGES; i++)
		memcpy(big_b + i * PAGE, big_a + i * PAGE, PAGE);
	return (now_ns() - t) / BIG_PAGES;
}

/* A copy of a page none of whose lines is cached, as migration between nodes copies a page of a
 * working set far beyond the LLC: random 4 KiB pages of 1 GiB to random pages of another 1 GiB,
 * both on huge pages as the kernel's direct map is, with copy_page()'s `rep movsq` on x86. */
#define COLD_PAGES 262144UL /* 1 GiB */

static void copy_one(char *dst, const char *src)
{
#if defined(__x86_64__)
	unsigned long n = PAGE / 8;
	asm volatile("rep movsq" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
#else
	memcpy(dst, src, PAGE);
#endif
}

/* Best of `rounds` rounds of 65536 copies; -1 with less than 4 GiB of RAM (it maps 2 GiB). */
static double page_copy_cold_best(int rounds)
{
	if ((double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) < 4.0 * (1UL << 30))
		return -1;
	char *a = mmap(NULL, 2 * COLD_PAGES * PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (a == MAP_FAILED)
		return -1;
	madvise(a, 2 * COLD_PAGES * PAGE, MADV_HUGEPAGE);
	memset(a, 1, 2 * COLD_PAGES * PAGE);
	char *b = a + COLD_PAGES * PAGE;
	size_t *perm = malloc(COLD_PAGES * sizeof(*perm));
	for (size_t i = 0; i < COLD_PAGES; i++)
		perm[i] = i;
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	for (size_t i = COLD_PAGES - 1; i > 0; i--) { /* Fisher-Yates, xorshift64 */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t j = x % (i + 1), t = perm[i];
		perm[i] = perm[j], perm[j] = t;
	}
	const size_t n = 65536;
	double best = 1e300;
	for (int r = 0; r < rounds; r++) {
		size_t off = (size_t)r * n;
		double t = now_ns();
		for (size_t i = 0; i < n; i++)
			copy_one(b + perm[(off + i * 7919) % COLD_PAGES] * PAGE,
				 a + perm[(off + i) % COLD_PAGES] * PAGE);
		double v = (now_ns() - t) / n;
		best = v < best ? v : best;
	}
	free(perm);
	munmap(a, 2 * COLD_PAGES * PAGE);
	return best;
}

/* One store per page over 512 present pages: TLB hits. */
static double touch_hot(void)
{
	double t = now_ns();
	for (int r = 0; r < 100; r++)
		for (size_t i = 0; i < 512; i++)
			big_a[i * PAGE + r] = 1;
	return (now_ns() - t) / (100 * 512);
}

/* One store per page over 64 MiB of present pages: every store misses the TLB. */
static double touch_cold(void)
{
	double t = now_ns();
	for (int r = 0; r < 4; r++)
		for (size_t i = 0; i < BIG_PAGES; i++)
			big_a[i * PAGE + 64 * r] = 1;
	return (now_ns() - t) / (4 * BIG_PAGES);
}

/* madvise(MADV_DONTNEED) of n present pages in one call, single-threaded. */
static double dontneed(size_t n)
{
	char *p = map(n);
	double total = 0;
	for (int r = 0; r < 200; r++) {
		for (size_t i = 0; i < n; i++)
			p[i * PAGE] = 1;
		double t = now_ns();
		madvise(p, n * PAGE, MADV_DONTNEED);
		total += now_ns() - t;
	}
	munmap(p, n * PAGE);
	return total / 200;
}
static double dontneed_1(void) { return dontneed(1); }
static double dontneed_32(void) { return dontneed(32); }

/* mprotect of n present pages of a VMA to PROT_READ and back; the time of the PROT_READ call. */
static double protect(size_t n)
{
	char *p = map(n);
	for (size_t i = 0; i < n; i++)
		p[i * PAGE] = 1;
	double total = 0;
	for (int r = 0; r < 200; r++) {
		double t = now_ns();
		mprotect(p, n * PAGE, PROT_READ);
		total += now_ns() - t;
		mprotect(p, n * PAGE, PROT_READ | PROT_WRITE);
	}
	munmap(p, n * PAGE);
	return total / 200;
}
static double protect_1(void) { return protect(1); }
static double protect_32(void) { return protect(32); }

/* The IPI test: CPU 1 spins reading the clock and records every gap (time taken from it). */
static atomic_int spin_stop, spin_ready;
static double gap_total, gaps[100000];
static long gap_count;

static void *spinner(void *arg)
{
	(void)arg;
	struct sched_param sp = { .sched_priority = 1 };
	pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	atomic_store(&spin_ready, 1);
	double last = now_ns();
	while (!atomic_load_explicit(&spin_stop, memory_order_relaxed)) {
		double t = now_ns();
		if (t - last > 300) {
			if (gap_count < 100000)
				gaps[gap_count] = t - last;
			gap_total += t - last;
			gap_count++;
		}
		last = t;
	}
	return NULL;
}

/* Spinners in user space on CPUs 1..n (SCHED_FIFO where allowed): the shootdown test's busy
 * remote threads (common.h). */
static pthread_t busy_tids[MAX_CPUS];
static void busy_start(int n)
{
	atomic_store(&stop_flag, 0);
	atomic_store(&started, 0);
	for (int i = 0; i < n; i++)
		busy_tids[i] = spawn_on(1 + i, remote_thread, (void *)(intptr_t)R_BUSY);
	while (atomic_load(&started) < n)
		;
	usleep(1000);
}

static void busy_end(int n)
{
	atomic_store(&stop_flag, 1);
	for (int i = 0; i < n; i++)
		pthread_join(busy_tids[i], NULL);
}

/* One page touched, then one op on it, `iters` times; ns per op call (touch excluded). */
static double op_1(int op, int iters)
{
	char *p = map(2);
	static double per_call[20000];
	iters = iters > 20000 ? 20000 : iters;
	for (int i = 0; i < iters; i++) {
		p[0] = 1;
		double t = now_ns();
		if (op == 0) {
			madvise(p, PAGE, MADV_DONTNEED);
		} else if (op == 1) {
			mprotect(p, PAGE, PROT_READ);
		} else {
			munmap(p, PAGE);
		}
		per_call[i] = now_ns() - t;
		if (op == 1)
			mprotect(p, PAGE, PROT_READ | PROT_WRITE);
		if (op == 2 && mmap(p, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
				    -1, 0) != p)
			exit(1);
	}
	munmap(p, 2 * PAGE);
	return median(per_call, iters);
}

/* An op over a freshly touched 512-page region (one VMA on a 2 MiB boundary) in calls of
 * `batch` pages, as a program sweeping its memory does; ns per call, median of 15 sweeps.
 * batch <= 256 so that no call covers the whole page table (no page-table free). */
static double sweep_op(int op, size_t batch)
{
	double per_sweep[15];
	for (int r = 0; r < 15; r++) {
		size_t len = 512 * PAGE, slop = (2UL << 20);
		char *raw = mmap(NULL, len + slop, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		char *p = (char *)(((uintptr_t)raw + slop - 1) & ~(slop - 1));
		madvise(p, len, MADV_NOHUGEPAGE);
		for (size_t i = 0; i < 512; i++)
			p[i * PAGE] = 1;
		long calls = 0;
		double t = now_ns();
		for (size_t i = 0; i < 512; i += batch, calls++) {
			if (op == 0)
				madvise(p + i * PAGE, batch * PAGE, MADV_DONTNEED);
			else if (op == 1)
				mprotect(p + i * PAGE, batch * PAGE, PROT_READ);
			else
				munmap(p + i * PAGE, batch * PAGE);
		}
		per_sweep[r] = (now_ns() - t) / calls;
		munmap(raw, len + slop);
	}
	return median(per_sweep, 15);
}

/* munmap of n present pages at the start of a 64-page VMA (no page table is freed). */
static double unmap_n(size_t n)
{
	double total = 0;
	for (int r = 0; r < 200; r++) {
		char *p = map(64);
		for (size_t i = 0; i < n; i++)
			p[i * PAGE] = 1;
		double t = now_ns();
		munmap(p, n * PAGE);
		total += now_ns() - t;
		munmap(p + n * PAGE, (64 - n) * PAGE);
	}
	return total / 200;
}
static double munmap_1(void) { return unmap_n(1); }
static double munmap_32(void) { return unmap_n(32); }

/* membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) per call; `busy` spinners on CPUs 1..busy, or
 * one thread blocked on CPU 1 (busy = 0: a second mm user, no CPU to IPI). */

static double membarrier_call(int busy)
{
	const int n = 5000;
	pthread_t sl = 0;
	if (busy < 0) {
		/* Alone in the mm: mm_users == 1 returns before any IPI work. */
	} else if (busy) {
		busy_start(busy);
	} else {
		atomic_store(&stop_flag, 0);
		sl = spawn_on(1, remote_thread, (void *)(intptr_t)R_SLEEPING);
		usleep(20000);
	}
	static double per_call[5000];
	for (int i = 0; i < n; i++) {
		double t = now_ns();
		syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
		per_call[i] = now_ns() - t;
	}
	double ns = median(per_call, n);
	if (busy < 0) {
	} else if (busy) {
		busy_end(busy);
	} else {
		atomic_store(&stop_flag, 1);
		syscall(SYS_futex, &stop_flag, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		pthread_join(sl, NULL);
	}
	return ns;
}

/* A cache line bounced between CPU 0 and CPU 1: each side waits for the other's store.
 * ns per round trip (two line transfers). */
static _Alignas(64) atomic_long pingpong;
static void *ponger_line(void *arg)
{
	long n = (long)(intptr_t)arg;
	for (long i = 0; i < n; i++) {
		while (atomic_load_explicit(&pingpong, memory_order_acquire) != 2 * i + 1)
			;
		atomic_store_explicit(&pingpong, 2 * i + 2, memory_order_release);
	}
	return NULL;
}

static double line_round_trip(void)
{
	const long n = 200000;
	atomic_store(&pingpong, 0);
	pthread_t tid = spawn_on(1, ponger_line, (void *)(intptr_t)n);
	usleep(1000);
	/* Best of 20 chunks, as above. */
	double ns = 1e300;
	for (long c = 0; c < 20; c++) {
		double t = now_ns();
		for (long i = c * n / 20; i < (c + 1) * n / 20; i++) {
			atomic_store_explicit(&pingpong, 2 * i + 1, memory_order_release);
			while (atomic_load_explicit(&pingpong, memory_order_acquire) != 2 * i + 2)
				;
		}
		double v = (now_ns() - t) / (n / 20);
		ns = v < ns ? v : ns;
	}
	pthread_join(tid, NULL);
	return ns;
}

/* Locked read-modify-writes (lock cmpxchg, as llist_add() does) on k lines that CPU 1 has just
 * written, one after another on CPU 0: ns per line. k = 1 is a read-for-ownership the cmpxchg
 * waits out; with many lines their read-for-ownerships overlap, which is what a sender queueing
 * csds on many targets' call_single_queue heads pays (docs/kernel/smp-call-function.md). */
#define RMW_LINES 64
#define RMW_STRIDE 4096 /* a page apart: no prefetcher pulls the next line in */
#define RMW_REPS 20000
static char *rmw_buf;
static int rmw_k;
static atomic_int rmw_turn; /* 1: CPU 1 writes the lines; 2: CPU 0 takes them; 0: stop */
static void *rmw_owner(void *arg)
{
	(void)arg;
	for (;;) {
		int t;
		while ((t = atomic_load_explicit(&rmw_turn, memory_order_acquire)) == 2)
			;
		if (t == 0)
			return NULL;
		for (int i = 0; i < rmw_k; i++)
			(*(volatile long *)(rmw_buf + (size_t)i * RMW_STRIDE))++;
		atomic_store_explicit(&rmw_turn, 2, memory_order_release);
	}
}

static double rmw_lines(int k)
{
	rmw_buf = map(RMW_LINES);
	rmw_k = k;
	atomic_store(&rmw_turn, 2);
	pthread_t tid = spawn_on(1, rmw_owner, NULL);
	/* Median of the repetitions: the clock reads cost about as much as one line. */
	static double v[RMW_REPS];
	for (int r = 0; r < RMW_REPS; r++) {
		atomic_store_explicit(&rmw_turn, 1, memory_order_release);
		while (atomic_load_explicit(&rmw_turn, memory_order_acquire) != 2)
			;
		double t = now_ns();
		for (int i = 0; i < k; i++) {
			long *p = (long *)(rmw_buf + (size_t)i * RMW_STRIDE);
			long old = atomic_load_explicit((_Atomic long *)p, memory_order_relaxed);
			while (!atomic_compare_exchange_weak((_Atomic long *)p, &old, old + 1))
				;
		}
		v[r] = (now_ns() - t) / k;
	}
	atomic_store(&rmw_turn, 0);
	pthread_join(tid, NULL);
	munmap(rmw_buf, RMW_LINES * PAGE);
	return median(v, RMW_REPS);
}

/* One `pause` (the kernel's cpu_relax() on x86), in a dependent loop: ns each, best of 20. A
 * spinner that sees its line change only after the pause it is in reacts that much later. */
static double pause_latency(void)
{
	const long n = 100000;
	double best = 1e300;
	for (int r = 0; r < 20; r++) {
		double t = now_ns();
		for (long i = 0; i < n; i++)
			__builtin_ia32_pause();
		double v = (now_ns() - t) / n;
		best = v < best ? v : best;
	}
	return best;
}

/* A spinlock passed back and forth between CPU 0 and CPU 1, each holding it for a short loop
 * that touches no shared line while the other spins on the lock word with loads: ns per
 * hand-off, the hold taken out. `claim` 0: the waiter's load that sees its turn is the whole
 * acquisition (a ticket lock); 1: it then claims the word with a cmpxchg, a write to the line the
 * releaser's cache still shares (queued_spin_lock_slowpath()'s set_locked() after its
 * atomic_cond_read_acquire()). Both include the release's invalidation of the spinner's copy:
 * about 2 and 3 line transfers. docs/kernel/spinlock.md. */
#define HANDOFFS 20000
#define HOLD_LOOP 400
static _Alignas(64) atomic_long handoff_word;
static int handoff_claim;
static atomic_int handoff_ready;
static void hold_loop(void)
{
	volatile long x = 0;
	for (long k = 0; k < HOLD_LOOP; k++)
		x = k;
}
static void handoff_side(int me)
{
	for (long i = 0; i < HANDOFFS; i++) {
		long turn = 2 * i + me;
		while (atomic_load_explicit(&handoff_word, memory_order_acquire) != turn)
			__builtin_ia32_pause();
		if (handoff_claim) {
			long expect = turn;
			atomic_compare_exchange_strong(&handoff_word, &expect, -turn - 1);
		}
		hold_loop();
		atomic_store_explicit(&handoff_word, turn + 1, memory_order_release);
	}
}
static void *handoff_other(void *arg)
{
	(void)arg;
	atomic_store(&handoff_ready, 1);
	handoff_side(1);
	return NULL;
}
static void lock_handoffs(double *load_only, double *claimed)
{
	double hold = 1e300;
	for (int r = 0; r < 20; r++) {
		double t = now_ns();
		for (long i = 0; i < HANDOFFS; i++)
			hold_loop();
		double v = (now_ns() - t) / HANDOFFS;
		hold = v < hold ? v : hold;
	}
	/* The two kinds alternate, best of 20 each: the host's load moves both alike. */
	double best[2] = { 1e300, 1e300 };
	for (int r = 0; r < 20; r++) {
		for (int c = 0; c < 2; c++) {
			handoff_claim = c;
			atomic_store(&handoff_word, 0);
			atomic_store(&handoff_ready, 0);
			pthread_t tid = spawn_on(1, handoff_other, NULL);
			while (!atomic_load(&handoff_ready))
				;
			double t = now_ns();
			handoff_side(0);
			double v = (now_ns() - t) / (2.0 * HANDOFFS) - hold;
			pthread_join(tid, NULL);
			best[c] = v < best[c] ? v : best[c];
		}
	}
	*load_only = best[0];
	*claimed = best[1];
}

/* Per iteration: fault one page in, then madvise it away: one TLB shootdown IPI to CPU 1. */
static double fault_and_zap(int iters)
{
	char *p = map(1);
	double t = now_ns();
	for (int i = 0; i < iters; i++) {
		p[0] = 1;
		madvise(p, PAGE, MADV_DONTNEED);
	}
	double ns = (now_ns() - t) / iters;
	munmap(p, PAGE);
	return ns;
}

/* Map `n` pages of `fd` MAP_SHARED, PROT_READ and time the first read of every `stride`th page;
 * ns per read. Closes `fd`. */
static double time_first_reads(int fd, size_t n, size_t stride)
{
	char *p = mmap(NULL, n * PAGE, PROT_READ, MAP_SHARED, fd, 0);
	double t = now_ns();
	for (size_t i = 0; i < n; i += stride)
		sink = p[i * PAGE];
	double ns = (now_ns() - t) / (n / stride);
	munmap(p, n * PAGE);
	close(fd);
	return ns;
}

/* A file of n pages, written, so that all of them are in the page cache. */
static int cached_file(size_t n)
{
	char path[] = "/tmp/ipisim-costs-XXXXXX";
	int fd = mkstemp(path);
	unlink(path);
	ftruncate(fd, n * PAGE);
	char *w = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	memset(w, 1, n * PAGE);
	munmap(w, n * PAGE);
	return fd;
}

/* Read faults on a MAP_SHARED mapping of a file already in the page cache. */
static double file_fault(void)
{
	return time_first_reads(cached_file(4096), 4096, 1);
}

/* Write faults on a MAP_PRIVATE mapping of a file already in the page cache: do_cow_fault()
 * copies each page into a new anonymous one (write faults map no pages around). ns per fault. */
static double cow_fault(void)
{
	size_t n = 4096;
	int fd = cached_file(n);
	char *p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	double t = now_ns();
	for (size_t i = 0; i < n; i++)
		p[i * PAGE] = 2;
	double ns = (now_ns() - t) / n;
	munmap(p, n * PAGE);
	close(fd);
	return ns;
}

/* Read faults that map one page each: only every 32nd page of the file is in the page cache,
 * so fault-around finds nothing else in its 16-page window. ns per fault. */
static double file_fault_single(void)
{
	char path[] = "/tmp/ipisim-costs-XXXXXX";
	int fd = mkstemp(path);
	unlink(path);
	size_t n = 4096, stride = 32;
	ftruncate(fd, n * PAGE);
	for (size_t i = 0; i < n; i += stride)
		if (pwrite(fd, "x", 1, i * PAGE) != 1)
			die("pwrite");
	return time_first_reads(fd, n, stride);
}

/* usemem --readonly: read every 8-byte word of the BIG_PAGES present pages of `buf`; ns per
 * 4 KiB page. */
static double read_pages(const char *buf)
{
	unsigned long sum = 0;
	double t = now_ns();
	for (size_t i = 0; i < BIG_PAGES * PAGE / sizeof(long); i++)
		sum += ((const volatile unsigned long *)buf)[i];
	sink = (char)sum;
	return (now_ns() - t) / BIG_PAGES;
}

static double read_page(void) { return read_pages(big_a); }

/* The reader above on CPU 0 while CPU 1 mprotect()s `n` touched pages of the same mm back and
 * forth: each call flushes CPU 0's TLB by IPI, page by page (INVLPG) up to the 33-page ceiling,
 * the whole of it above (seed 000's full flush, after which the reader refills its TLB; seed
 * 001's PFN list is 32 INVLPGs). The reader's time lost per flush IPI, ns (0 if none landed). */
static atomic_int flusher_stop;
static atomic_long flusher_calls;
static char *flusher_pages;
static size_t flusher_n;

static void *flusher(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&flusher_stop, memory_order_relaxed)) {
		mprotect(flusher_pages, flusher_n * PAGE, PROT_READ);
		mprotect(flusher_pages, flusher_n * PAGE, PROT_READ | PROT_WRITE);
		atomic_fetch_add_explicit(&flusher_calls, 2, memory_order_relaxed);
	}
	return NULL;
}

#define READER_PASSES 40

/* READER_PASSES of read_page(), ns in all. */
static double read_passes(void)
{
	double t = now_ns();
	for (int i = 0; i < READER_PASSES; i++)
		read_page();
	return now_ns() - t;
}

/* read_passes() alone, just before a measurement beside it: best of two, as the host's speed
 * drifts between runs. */
static double read_passes_alone(void)
{
	double alone = read_passes(), again = read_passes();
	return again < alone ? again : alone;
}

static double reader_flush(size_t n)
{
	double alone = read_passes_alone();
	flusher_pages = map(n);
	memset(flusher_pages, 1, n * PAGE);
	flusher_n = n;
	atomic_store(&flusher_stop, 0);
	pthread_t tid = spawn_on(1, flusher, NULL);
	usleep(1000);
	long before = atomic_load(&flusher_calls);
	double t = read_passes();
	long calls = atomic_load(&flusher_calls) - before;
	atomic_store(&flusher_stop, 1);
	pthread_join(tid, NULL);
	munmap(flusher_pages, n * PAGE);
	return calls > 0 ? (t - alone) / (double)calls : 0;
}

/* The same reader while the same loop reads big_b on `sibling`, the other thread of CPU 0's
 * core: ns in all (SMT: machine.smt_yield = 2 x alone / both). */
static atomic_int sibling_stop;

static void *sibling_reader(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&sibling_stop, memory_order_relaxed))
		read_pages(big_b);
	return NULL;
}

static double read_passes_beside(int sibling)
{
	atomic_store(&sibling_stop, 0);
	pthread_t tid = spawn_on(sibling, sibling_reader, NULL);
	usleep(1000);
	double t = read_passes();
	atomic_store(&sibling_stop, 1);
	pthread_join(tid, NULL);
	return t;
}

/* First read of each page of a sparse file through MAP_SHARED, PROT_READ (lru-file-mmap-read):
 * readahead allocates, zeroes and inserts the pages, fault-around maps them. ns per page,
 * not counting the read of the page's contents. */
static int sparse_fd(size_t pages)
{
	char path[] = "/var/tmp/ipisim-costs-XXXXXX";
	int fd = mkstemp(path);
	unlink(path);
	if (fd < 0 || ftruncate(fd, pages * PAGE))
		exit(1);
	return fd;
}

static double sparse_first_touch(void)
{
	size_t n = 16384;
	int fd = sparse_fd(n);
	return time_first_reads(fd, n, 1);
}

/* MADV_PAGEOUT of clean, mapped page-cache pages in 32-page calls: isolate, rmap walks, unmap,
 * flush, remove from the page cache, free. ns per page. */
static double pageout(void)
{
	size_t n = 16384;
	int fd = sparse_fd(n);
	char *p = mmap(NULL, n * PAGE, PROT_READ, MAP_SHARED, fd, 0);
	for (size_t i = 0; i < n; i++)
		sink = p[i * PAGE];
	double t = now_ns();
	for (size_t i = 0; i < n; i += 32)
		madvise(p + i * PAGE, 32 * PAGE, 21 /* MADV_PAGEOUT */);
	double ns = (now_ns() - t) / n;
	munmap(p, n * PAGE);
	close(fd);
	return ns;
}

/* AnonHugePages of this process, in KiB (smaps_rollup), or -1 if it cannot be read. */
static long anon_huge_kib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kib = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* munmap of THP-backed anonymous memory (zap_huge_pmd and freeing each 2 MiB folio), per 2 MiB;
 * -1 when the kernel gave fewer than all of the PMDs a huge page (THP off, or no free 2 MiB). */
#define THP (2UL << 20)
#define THP_N 512UL /* 1 GiB: its struct pages (8 MiB) do not stay in cache, as in a big unmap */
static double thp_munmap(void)
{
	char *raw = mmap(NULL, (THP_N + 1) * THP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		die("mmap");
	char *p = (char *)(((uintptr_t)raw + THP - 1) & ~(THP - 1));
	madvise(p, THP_N * THP, 14 /* MADV_HUGEPAGE */);
	long before = anon_huge_kib();
	for (size_t i = 0; i < THP_N * THP; i += PAGE)
		p[i] = 1;
	long huge = anon_huge_kib() - before;
	double t = now_ns();
	munmap(raw, (THP_N + 1) * THP);
	double ns = (now_ns() - t) / THP_N;
	return before >= 0 && huge >= (long)(THP_N * THP / 1024) ? ns : -1;
}

/* The best of 5 thp_munmap runs that got their huge pages; -1 if none did. */
static double thp_munmap_best(void)
{
	double best = -1;
	for (int i = 0; i < 5; i++) {
		double v = thp_munmap();
		if (v > 0 && (best < 0 || v < best))
			best = v;
	}
	return best;
}

/* Two threads on CPU 0 hand a futex back and forth: each hand-off is one context switch. */
static atomic_int turn;

static void *ponger(void *arg)
{
	long n = (long)arg;
	for (long i = 0; i < n; i++) {
		while (atomic_load(&turn) != 1)
			syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
		atomic_store(&turn, 0);
		syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	return NULL;
}

static double context_switch(void)
{
	const long n = 20000;
	pthread_t tid;
	atomic_store(&turn, 0);
	pthread_create(&tid, NULL, ponger, (void *)n);
	double t = now_ns();
	for (long i = 0; i < n; i++) {
		atomic_store(&turn, 1);
		syscall(SYS_futex, &turn, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		while (atomic_load(&turn) != 0)
			syscall(SYS_futex, &turn, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
	}
	double ns = (now_ns() - t) / (2 * n);
	pthread_join(tid, NULL);
	return ns;
}

/* Two threads on this CPU calling sched_yield() in turn: one switch each (the yield of K Prateek
 * Nayak's Milan cpumask test, machine::tests::contended_lines_on_milan_...). */
static atomic_int yield_stop;

static void *yielder(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&yield_stop, memory_order_relaxed))
		sched_yield();
	return NULL;
}

static double yield_switch(void)
{
	const long n = 200000;
	pthread_t tid;
	atomic_store(&yield_stop, 0);
	pthread_create(&tid, NULL, yielder, NULL);
	sched_yield();
	double t = now_ns();
	for (long i = 0; i < n; i++)
		sched_yield();
	double ns = (now_ns() - t) / (2 * n);
	atomic_store(&yield_stop, 1);
	pthread_join(tid, NULL);
	return ns;
}

static void *nothing(void *arg) { return arg; }

static double thread_create(void)
{
	double t = now_ns();
	for (int i = 0; i < 200; i++) {
		pthread_t tid;
		pthread_create(&tid, NULL, nothing, NULL);
		pthread_join(tid, NULL);
	}
	return (now_ns() - t) / 200;
}

/* Wake a thread blocked on CPU 1 after CPU 1 has idled for 50 ms (halted, not polling). */
static atomic_int wake_word;
static double woke_at;

static void *sleeper(void *arg)
{
	(void)arg;
	while (!atomic_load(&wake_word))
		syscall(SYS_futex, &wake_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	woke_at = now_ns();
	return NULL;
}

static double idle_wakeup(void)
{
	atomic_store(&wake_word, 0);
	pthread_t tid = spawn_on(1, sleeper, NULL);
	usleep(50000);
	double t = now_ns();
	atomic_store(&wake_word, 1);
	syscall(SYS_futex, &wake_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	pthread_join(tid, NULL);
	return woke_at - t;
}

int main(int argc, char **argv)
{
	int ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	int quick = argc > 1 && !strcmp(argv[1], "--remote-only"); /* skip the local costs */
	if (argc > 1 && !strcmp(argv[1], "--local-only")) /* no other CPU may be used */
		ncpus = 1;
	int sibling = 0; /* --smt-sibling N: CPU 0's other SMT thread, if it has one */
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--smt-sibling"))
			sibling = atoi(argv[i + 1]);
	cpu_set_t one;
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	sched_setaffinity(0, sizeof(one), &one);
	big_a = map(BIG_PAGES);
	big_b = map(BIG_PAGES);
	memset(big_a, 1, BIG_PAGES * PAGE);
	memset(big_b, 1, BIG_PAGES * PAGE);

	if (quick)
		goto remote;
	printf("null_syscall %.1f\n", best_of(5, null_syscall));
	printf("first_touch %.1f\n", best_of(5, first_touch));
	printf("file_fault %.1f\n", best_of(5, file_fault));
	printf("file_fault_single %.1f\n", best_of(5, file_fault_single));
	printf("cow_fault %.1f\n", best_of(5, cow_fault));
	printf("read_page %.1f\n", best_of(5, read_page));
	printf("sparse_first_touch %.1f\n", best_of(5, sparse_first_touch));
	printf("pageout %.1f\n", best_of(5, pageout));
	printf("page_clear %.1f\n", best_of(5, page_clear));
	printf("page_copy %.1f\n", best_of(5, page_copy));
	double cold_copy = page_copy_cold_best(5);
	if (cold_copy > 0) /* only with room for its 2 GiB */
		printf("page_copy_cold %.1f\n", cold_copy);
	printf("touch_hot %.2f\n", best_of(5, touch_hot));
	printf("touch_cold %.2f\n", best_of(5, touch_cold));
	printf("madvise_1 %.1f\n", best_of(5, dontneed_1));
	printf("madvise_32 %.1f\n", best_of(5, dontneed_32));
	printf("mprotect_1 %.1f\n", best_of(5, protect_1));
	printf("mprotect_32 %.1f\n", best_of(5, protect_32));

	static const char *sweep_name[] = { "madvise", "mprotect", "munmap" };
	for (int op = 0; op < 3; op++) {
		printf("%s_sweep_1 %.1f\n", sweep_name[op], sweep_op(op, 1));
		printf("%s_sweep_256 %.1f\n", sweep_name[op], sweep_op(op, 256));
	}
	/* 32 pages per call: flushed page by page (INVLPG), under the 33-page ceiling. */
	printf("mprotect_sweep_32 %.1f\n", sweep_op(1, 32));
	printf("munmap_1 %.1f\n", best_of(5, munmap_1));
	printf("munmap_32 %.1f\n", best_of(5, munmap_32));
	double thp = thp_munmap_best();
	if (thp > 0) /* only where THP gives every PMD a huge page */
		printf("thp_munmap %.1f\n", thp);
	printf("context_switch %.1f\n", best_of(5, context_switch));
	printf("yield_switch %.1f\n", best_of(5, yield_switch));
	printf("thread_create %.1f\n", best_of(5, thread_create));
	if (ncpus >= 2) /* needs CPU 1 */
		printf("idle_wakeup %.1f\n", best_of(5, idle_wakeup));

remote:
	if (ncpus < 2)
		return 0;
	/* Syscalls on one present page, alone and with 1..N-1 busy remote threads: the marginal
	 * cost of one remote shootdown (best of 3, 5000 calls each). */
	static const char *opname[] = { "madvise", "mprotect", "munmap" };
	for (int op = 0; op < 3; op++) {
		double best = 1e300;
		for (int r = 0; r < 3; r++) {
			double v = op_1(op, 5000);
			best = v < best ? v : best;
		}
		printf("%s_1_busy0 %.1f\n", opname[op], best);
	}
	for (int n = 1; n < ncpus && n <= 1023; n++) {
		busy_start(n);
		for (int op = 0; op < 3; op++) {
			double best = 1e300;
			for (int r = 0; r < 3; r++) {
				double v = op_1(op, 5000);
				best = v < best ? v : best;
			}
			printf("%s_1_busy%d %.1f\n", opname[op], n, best);
		}
		busy_end(n);
	}
	if (syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0) {
		printf("membarrier_alone %.1f\n", membarrier_call(-1));
		printf("membarrier_busy0 %.1f\n", membarrier_call(0));
		for (int n = 1; n < ncpus && n <= 1023; n++)
			printf("membarrier_busy%d %.1f\n", n, membarrier_call(n));
	}
	printf("line_round_trip %.1f\n", line_round_trip());
	printf("rmw_lines_1 %.1f\n", rmw_lines(1));
	printf("rmw_lines_64 %.1f\n", rmw_lines(RMW_LINES));
	double load_only, claimed;
	lock_handoffs(&load_only, &claimed);
	printf("lock_handoff_load %.1f\n", load_only);
	printf("lock_handoff_claim %.1f\n", claimed);
	printf("pause %.1f\n", pause_latency());
	printf("reader_flush_1 %.1f\n", reader_flush(1));
	printf("reader_flush_32 %.1f\n", reader_flush(32));
	printf("reader_flush_64 %.1f\n", reader_flush(64));
	if (sibling > 0 && sibling < ncpus) {
		const double pages = READER_PASSES * (double)BIG_PAGES;
		printf("smt_read_alone %.1f\n", read_passes_alone() / pages);
		printf("smt_read_both %.1f\n", read_passes_beside(sibling) / pages);
	}

	const int iters = 20000;
	double alone = fault_and_zap(iters);
	pthread_t tid = spawn_on(1, spinner, NULL);
	while (!atomic_load(&spin_ready))
		;
	usleep(1000);
	gap_total = 0;
	gap_count = 0;
	double with_ipi = fault_and_zap(iters);
	atomic_store(&spin_stop, 1);
	pthread_join(tid, NULL);
	printf("fault_zap_alone %.1f\n", alone);
	printf("fault_zap_ipi %.1f\n", with_ipi);
	/* Median gap: robust to the host descheduling the spinner's vCPU. */
	printf("victim_gap %.1f\n", gap_count ? median(gaps, gap_count < 100000 ? (int)gap_count : 100000) : 0.0);
	printf("victim_gaps_per_iter %.3f\n", (double)gap_count / iters);
	return 0;
}
