/*
 * lru_file_mmap_read: vm-scalability's case-lru-file-mmap-read, as the
 * `vm-scalability/lru-file-mmap-read` scenario models it, run for real (in the `validate --qemu`
 * guest, on a filesystem whose page cache reclaim can drop: not tmpfs).
 *
 * `readers` processes, reader i pinned to CPU i, each create their own sparse file of `bytes`
 * bytes in `dir` (ftruncate: a hole, read as zeroes without I/O), map it MAP_SHARED, PROT_READ and
 * read it once from start to end, 8 bytes at a time (usemem --readonly), then exit. Together the
 * files are larger than memory, so reclaim must unmap pages that other readers still map. The
 * parent (pinned where it was started) reads the /proc/interrupts TLB and CAL rows before the
 * first reader starts and after the last exits, removes the files, and prints per repeat:
 *   syscalls=N ns=T cpu_ns=C tlb=a,b,... cal=a,b,...
 * (syscalls: readers; ns: wall time of the run). Build: cc -O2 -pthread -o lru_file_mmap_read
 * lru_file_mmap_read.c
 */
#define _GNU_SOURCE
#define PROGRAM "lru_file_mmap_read"
#include "common.h"
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#define TMPFS_MAGIC 0x01021994
#define RAMFS_MAGIC 0x858458f6

static void usage(void)
{
	fprintf(stderr, "usage: lru_file_mmap_read --dir DIR --readers N --bytes B [--repeats N]\n");
	exit(2);
}

static void reader(const char *dir, int i, long long bytes)
{
	pin_to(i);
	char path[4096];
	snprintf(path, sizeof(path), "%s/sparse-%d", dir, i);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("open");
	if (ftruncate(fd, (off_t)bytes))
		die("ftruncate");
	const volatile uint64_t *p = mmap(NULL, (size_t)bytes, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		die("mmap");
	close(fd);
	uint64_t sum = 0;
	for (size_t w = 0, n = (size_t)bytes / 8; w < n; w++)
		sum += p[w];
	_exit(sum != 0);
}

int main(int argc, char **argv)
{
	const char *dir = "/mnt";
	long readers = 0, repeats = 1;
	long long bytes = 0;
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *a = argv[i], *v = argv[i + 1];
		if (!strcmp(a, "--dir"))
			dir = v;
		else if (!strcmp(a, "--readers"))
			readers = atol(v);
		else if (!strcmp(a, "--bytes"))
			bytes = atoll(v);
		else if (!strcmp(a, "--repeats"))
			repeats = atol(v);
		else
			usage();
	}
	if (argc % 2 == 0 || readers < 1 || bytes < 8 || repeats < 1)
		usage();
	/* Without swap, reclaim cannot drop tmpfs or ramfs pages: the files would fill memory. */
	struct statfs fs;
	if (statfs(dir, &fs))
		die(dir);
	if (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) {
		fprintf(stderr, PROGRAM ": %s is tmpfs or ramfs: reclaim cannot drop its pages\n", dir);
		return 2;
	}
	int ncpus;
	pin_home(readers, "readers", readers, &ncpus);
	static uint64_t tlb0[MAX_CPUS], cal0[MAX_CPUS], tlb1[MAX_CPUS], cal1[MAX_CPUS];
	for (long r = 0; r < repeats; r++) {
		if (!read_irq_rows(tlb0, cal0, ncpus)) {
			fprintf(stderr, PROGRAM ": /proc/interrupts has no TLB or CAL row\n");
			return 3;
		}
		double t0 = now_ns(), c0 = cpu_ns();
		pid_t pid[MAX_CPUS];
		for (int i = 0; i < readers; i++) {
			pid[i] = fork();
			if (pid[i] < 0)
				die("fork");
			if (pid[i] == 0)
				reader(dir, i, bytes);
		}
		int failed = 0;
		for (int i = 0; i < readers; i++) {
			int st;
			if (waitpid(pid[i], &st, 0) < 0)
				die("waitpid");
			failed |= !WIFEXITED(st) || WEXITSTATUS(st);
		}
		double t1 = now_ns(), c1 = cpu_ns();
		read_irq_rows(tlb1, cal1, ncpus);
		if (failed) {
			fprintf(stderr, PROGRAM ": a reader failed\n");
			return 1;
		}
		for (int i = 0; i < readers; i++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/sparse-%d", dir, i);
			unlink(path);
		}
		printf("syscalls=%ld ns=%.0f cpu_ns=%.0f ", readers, t1 - t0, c1 - c0);
		print_irq_deltas(tlb0, tlb1, cal0, cal1, ncpus);
	}
	return 0;
}
