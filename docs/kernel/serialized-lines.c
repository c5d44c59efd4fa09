// Does a reader that serializes between loads (as INVLPG does in the PFN-list flush) pay one
// line transfer per line it reads from another core's cache, or do the later lines come early?
// docs/kernel/x86-tlb-flush.md section 4. gcc -O2 -pthread serialized-lines.c -o lines;
// ./lines LINES MODE: MODE 0 plain loads, 1 SERIALIZE after each (CPUs with X86_FEATURE_SERIALIZE),
// 2 LFENCE after each. CPU 0 writes the lines, CPU 1 reads them, in turn. LOCAL=1: the same
// loads when the lines are already here (the serializing instructions' own cost).
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>

#define LINES 8
static volatile uint64_t buf[LINES * 8] __attribute__((aligned(4096)));
static _Atomic int turn = 0; // 0: writer's turn, 1: reader's turn
static int nlines, mode, iters = 200000;

static void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s); }
static inline void serialize(void) { if (mode == 2) _mm_lfence(); else __asm__ volatile(".byte 0x0f, 0x01, 0xe8" ::: "memory"); }

static void *writer(void *arg) {
    (void)arg; pin(0);
    for (int i = 0; i < iters; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != 0) ;
        for (int l = 0; l < nlines; l++) buf[l * 8] = i;
        atomic_store_explicit(&turn, 1, memory_order_release);
    }
    return 0;
}

int main(int argc, char **argv) {
    nlines = atoi(argv[1]); mode = atoi(argv[2]);
    pthread_t w; pthread_create(&w, 0, writer, 0); pin(1);
    uint64_t total = 0, sink = 0;
    for (int i = 0; i < iters; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != 1) ;
        serialize();
        uint64_t t0 = __rdtsc();
        for (int l = 0; l < nlines; l++) { sink += buf[l * 8]; if (mode) serialize(); }
        if (getenv("LOCAL")) { /* LOCAL=1: time a second pass over the lines, now in this cache */
            _mm_lfence(); t0 = __rdtsc();
            for (int l = 0; l < nlines; l++) { sink += buf[l * 8]; if (mode) serialize(); }
        }
        _mm_lfence();
        uint64_t t1 = __rdtsc();
        total += t1 - t0;
        atomic_store_explicit(&turn, 0, memory_order_release);
    }
    pthread_join(w, 0);
    printf("lines %d serialize %d: %.1f cycles per iteration (sink %lu)\n", nlines, mode, (double)total / iters, (unsigned long)(sink & 1));
    return 0;
}
