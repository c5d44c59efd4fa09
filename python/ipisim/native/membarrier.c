/*
 * membarrier: the `membarrier` scenario run for real, to validate ipisim against this machine.
 *
 * The main thread (pin it before exec) registers with MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
 * while it is the only thread (mm_users == 1: no IPI), starts `threads` threads on the next CPUs,
 * spinning in user space (busy) or blocked on a futex (sleeping), sleeps `settle-ms`, spins 20 ms,
 * then calls membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) `calls` times. The
 * /proc/interrupts TLB and CAL rows are read just before the first call and just after the last.
 * Each repeat prints:
 *   syscalls=N ns=T cpu_ns=C tlb=a,b,... cal=a,b,...
 * (ns: wall time; cpu_ns: the calling thread's CPU time)
 * Build: cc -O2 -pthread -o membarrier membarrier.c
 */
#define _GNU_SOURCE
#define PROGRAM "membarrier"
#include "common.h"
#include <linux/membarrier.h>

static void usage(void)
{
	fprintf(stderr, "usage: membarrier --calls N --remote busy|sleeping|none --threads N "
			"[--settle-ms N] [--repeats N]\n");
	exit(2);
}

static long membarrier(int cmd)
{
	return syscall(__NR_membarrier, cmd, 0, 0);
}

int main(int argc, char **argv)
{
	enum remote remote = R_BUSY;
	long calls = 10000, threads = 1, settle_ms = 50, repeats = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--remote"))
			remote = !strcmp(v, "busy") ? R_BUSY : !strcmp(v, "sleeping") ? R_SLEEPING
			       : !strcmp(v, "none") ? R_NONE : (usage(), 0);
		else if (!strcmp(a, "--calls"))
			calls = atol(v);
		else if (!strcmp(a, "--threads"))
			threads = atol(v);
		else if (!strcmp(a, "--settle-ms"))
			settle_ms = atol(v);
		else if (!strcmp(a, "--repeats"))
			repeats = atol(v);
		else
			usage();
	}
	if (calls < 1 || threads < 0 || repeats < 1 || settle_ms < 0)
		usage();
	if (remote == R_NONE)
		threads = 0;

	int ncpus;
	int home = pin_home(threads, "remote threads", threads + 1, &ncpus);
	/* Alone in the mm, registration sends no IPI (sync_runqueues_membarrier_state). */
	if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
		die("membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)");

	static uint64_t tlb0[MAX_CPUS], cal0[MAX_CPUS], tlb1[MAX_CPUS], cal1[MAX_CPUS];
	if (!read_irq_rows(tlb0, cal0, ncpus)) {
		fprintf(stderr, "membarrier: /proc/interrupts has no TLB or CAL row\n");
		return 3;
	}
	for (long r = 0; r < repeats; r++) {
		atomic_store(&stop_flag, 0);
		atomic_store(&started, 0);
		pthread_t tid[MAX_CPUS];
		for (long t = 0; t < threads; t++)
			tid[t] = spawn_on((int)((home + 1 + t) % ncpus), remote_thread, (void *)(intptr_t)remote);
		while (atomic_load(&started) < threads)
			;
		if (settle_ms > 0)
			usleep((useconds_t)settle_ms * 1000);
		/* Stay busy past the first ticks: a tick that finds an idle CPU after this one slept kicks
		 * it for nohz idle balance (nohz_balancer_kick() -> kick_ilb(), a CAL IPI since 5.8). */
		spin_ns(20e6);

		read_irq_rows(tlb0, cal0, ncpus);
		double t0 = now_ns(), c0 = cpu_ns();
		for (long i = 0; i < calls; i++)
			if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED))
				die("membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)");
		double t1 = now_ns(), c1 = cpu_ns();
		read_irq_rows(tlb1, cal1, ncpus);

		atomic_store(&stop_flag, 1);
		syscall(SYS_futex, &stop_flag, FUTEX_WAKE_PRIVATE, MAX_CPUS, NULL, NULL, 0);
		for (long t = 0; t < threads; t++)
			pthread_join(tid[t], NULL);

		printf("syscalls=%ld ns=%.0f cpu_ns=%.0f ", calls, t1 - t0, c1 - c0);
		print_irq_deltas(tlb0, tlb1, cal0, cal1, ncpus);
	}
	return 0;
}
