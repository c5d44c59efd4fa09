/*
 * The batched-unmap changelogs' swap benchmark (arm64 43b3dfdd0455, RISC-V 54d7431af73e), and the
 * one-page flush it is made of; the `swap-bench` scenario models both.
 *
 *   swap_bench --loops N [--sleepers K] [--size BYTES] [--cpu C] [--pmd-aligned 1] [--neighbour C]
 *              [--sbi 1]
 *     runs on CPU C (0; -1: wherever the scheduler keeps it, as the changelogs' program), maps
 *     BYTES (1 MiB) MAP_SHARED | MAP_ANONYMOUS, memsets it, starts K threads pinned to CPUs 0..K-1
 *     that only sleep (the RISC-V version: the mm's cpumask spans their CPUs, so every flush goes
 *     remote), then N times reads one byte of every page (swap-in) and madvise(MADV_PAGEOUT)s the
 *     region. Prints "ns_per_loop X" and "cpus E F", the CPUs exec ran it on and it ended on.
 *     --neighbour C forks a process of its own that spins on CPU C until the passes end.
 *     --sbi 1 (riscv) also counts, on every hart, the firmware's SBI PMU events over the N passes:
 *     "sbi NAME COUNT" for the IPIs and remote fences sent and received.
 *   swap_bench --zap N [--sleepers K] [--gap-us G] [--cpu C]
 *     N times: write one page, madvise(MADV_DONTNEED) it (one flush of one page), then spin G us.
 *     Prints "ns_per_call X", the mean time of the madvise calls alone.
 *
 * Needs swap for --loops (MADV_PAGEOUT of shmem pages). --pmd-aligned 1 starts the region on a
 * 2 MiB boundary: where ASLR puts it, a 1 MiB region crosses one about half the time, and then
 * MADV_PAGEOUT reclaims each pass in two lists, one a PMD (madvise_cold_or_pageout_pte_range()).
 */
#define _GNU_SOURCE
#define PROGRAM "swap_bench"
#include "common.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#define PAGE 4096UL

static void *sleeper(void *arg)
{
	(void)arg;
	atomic_fetch_add(&started, 1);
	for (;;)
		sleep(1);
	return NULL;
}

/* The neighbour process, if there is one (pid > 0), killed and reaped. */
static void stop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: swap_bench --loops N | --zap N [--sleepers K] [--size BYTES] [--gap-us G] [--cpu C]"
			" [--pmd-aligned 1] [--sbi 1] [--neighbour C]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long loops = 0, zap = 0, sleepers = 0, gap_us = 0, cpu = 0, aligned = 0, sbi = 0, neighbour = -1;
	size_t size = 1UL << 20;
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *a = argv[i];
		long v = strtol(argv[i + 1], NULL, 10);
		if (!strcmp(a, "--loops"))
			loops = v;
		else if (!strcmp(a, "--zap"))
			zap = v;
		else if (!strcmp(a, "--sleepers"))
			sleepers = v;
		else if (!strcmp(a, "--size"))
			size = (size_t)v;
		else if (!strcmp(a, "--gap-us"))
			gap_us = v;
		else if (!strcmp(a, "--cpu"))
			cpu = v;
		else if (!strcmp(a, "--pmd-aligned"))
			aligned = v;
		else if (!strcmp(a, "--sbi"))
			sbi = v;
		else if (!strcmp(a, "--neighbour"))
			neighbour = v;
		else
			usage();
	}
	if ((loops <= 0) == (zap <= 0) || sleepers < 0 || size < PAGE)
		usage();
	int ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (sleepers > ncpus || cpu < -1 || cpu >= ncpus || neighbour < -1 || neighbour >= ncpus)
		usage();
	int started_on = sched_getcpu();
	if (cpu >= 0)
		pin_to((int)cpu);
	for (long t = 0; t < sleepers; t++)
		spawn_on((int)t, sleeper, NULL);
	while (atomic_load(&started) < sleepers)
		usleep(1000);
	pid_t child = -1;
	if (neighbour >= 0 && (child = fork()) == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pin_to((int)neighbour);
		for (;;)
			;
	}
	if (child < 0 && neighbour >= 0)
		die("fork");
	usleep(20000); /* the sleepers are asleep, their CPUs idle; the neighbour runs */

	const size_t pmd = 2UL << 20;
	size_t slack = aligned ? pmd : 0;
	char *p = mmap(NULL, size + slack, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	if (aligned)
		p = (char *)(((uintptr_t)p + pmd - 1) & ~(pmd - 1));
	memset(p, 1, size);
	if (loops) {
		if (sbi)
			sbi_open(ncpus);
		double t = now_ns();
		for (long k = 0; k < loops; k++) {
			for (size_t i = 0; i < size; i += PAGE)
				(void)*(volatile char *)(p + i);
			if (madvise(p, size, MADV_PAGEOUT))
				die("madvise(MADV_PAGEOUT)");
		}
		printf("ns_per_loop %.1f\n", (now_ns() - t) / (double)loops);
	} else {
		double in_calls = 0;
		for (long k = 0; k < zap; k++) {
			p[0] = 1;
			double t = now_ns();
			if (madvise(p, PAGE, MADV_DONTNEED))
				die("madvise(MADV_DONTNEED)");
			double e = now_ns();
			in_calls += e - t;
			while (now_ns() - e < (double)gap_us * 1000)
				;
		}
		printf("ns_per_call %.1f\n", in_calls / (double)zap);
	}
	printf("cpus %d %d\n", started_on, sched_getcpu()); /* where exec ran it, where it ended */
	if (loops && sbi)
		sbi_print(ncpus);
	stop(child);
	return 0;
}
