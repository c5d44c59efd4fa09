//! A cache line that many CPUs read and a few write, such as mm_cpumask: each load leaves a copy
//! in the reader's cache, which serves its later loads until a write takes the line (MESI). A
//! `SpinLock` line remembers one copy only; this one remembers every reader's.

use super::{CpuMask, Time};

#[derive(Debug, Clone)]
pub struct SharedLine {
    /// The CPUs whose caches hold a copy: the last writer's and every reader's since.
    sharers: CpuMask,
    /// The CPU whose cache has the latest data (the last writer), or `IN_MEMORY`.
    owner: usize,
    /// When the last write is done: a load waits for it.
    written_at: Time,
    /// When the last access is served: the next write waits for it.
    free_at: Time,
    pub writes: u64,
}

const IN_MEMORY: usize = usize::MAX;

impl Default for SharedLine {
    /// A line in no CPU's cache yet: its first access moves nothing between CPUs.
    fn default() -> Self {
        SharedLine {
            sharers: CpuMask::new(),
            owner: IN_MEMORY,
            written_at: 0,
            free_at: 0,
            writes: 0,
        }
    }
}

impl SharedLine {
    /// A load on `cpu` at `now`; `line(from, to)` is the cost of moving the line between two
    /// CPUs' caches. Returns the time until the data is here: none if `cpu` has a copy, else
    /// the wait for the write in progress and the transfer from the owner's cache.
    pub fn read(&mut self, now: Time, cpu: usize, line: impl Fn(usize, usize) -> Time) -> Time {
        if self.sharers.test(cpu) {
            return 0;
        }
        let moved = if self.owner == IN_MEMORY {
            0
        } else {
            line(self.owner, cpu)
        };
        let start = now.max(self.written_at) + moved;
        self.sharers.set(cpu);
        self.free_at = self.free_at.max(start);
        start - now
    }

    /// An atomic read-modify-write on `cpu` at `now`. Returns the time until it is done: the
    /// wait for every access before it, then the line taken from the other caches that hold it
    /// (their invalidations go out side by side: the farthest copy's transfer), or nothing if
    /// `cpu` holds the only copy.
    pub fn write(&mut self, now: Time, cpu: usize, line: impl Fn(usize, usize) -> Time) -> Time {
        // The owner is one of the copies (a line only in memory has none but its readers').
        let moved = self
            .sharers
            .iter()
            .filter(|&c| c != cpu)
            .map(|c| line(c, cpu))
            .max()
            .unwrap_or(0);
        self.writes += 1;
        let start = now.max(self.free_at) + moved;
        self.sharers.clear_all();
        self.sharers.set(cpu);
        self.owner = cpu;
        (self.written_at, self.free_at) = (start, start);
        start - now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_keep_their_copies_until_a_write() {
        let line = |a: usize, b: usize| if a / 2 == b / 2 { 1 } else { 7 };
        let mut l = SharedLine::default();
        // From memory: nothing moves between caches.
        assert_eq!(l.write(0, 0, line), 0);
        // Each reader pays one transfer from the writer, then reads its copy for nothing.
        assert_eq!(l.read(10, 1, line), 1);
        assert_eq!(l.read(10, 2, line), 7);
        assert_eq!(l.read(20, 1, line), 0);
        assert_eq!(l.read(20, 2, line), 0);
        // CPU 0 still has a copy; its write must invalidate CPU 2's, the farthest.
        assert_eq!(l.write(30, 0, line), 7);
        assert_eq!(l.read(40, 1, line), 1);
        // Alone with the line, a writer writes it in place.
        assert_eq!(l.write(50, 1, line), 1);
        assert_eq!(l.write(60, 1, line), 0);
        assert_eq!(l.writes, 4);
    }

    #[test]
    fn writes_take_turns_and_loads_wait_for_the_write() {
        let line = |a: usize, b: usize| if a == b { 0 } else { 5 };
        let mut l = SharedLine::default();
        assert_eq!(l.write(0, 0, line), 0);
        // Three CPUs write at 10: each takes the line from the one before.
        assert_eq!(l.write(10, 1, line), 5);
        assert_eq!(l.write(10, 2, line), 10);
        assert_eq!(l.write(10, 3, line), 15);
        // A load at 12 waits for the last write (25), then the transfer.
        assert_eq!(l.read(12, 0, line), 18);
        // The next write waits for that load (30) and takes the line from both copies.
        assert_eq!(l.write(26, 1, line), 9);
    }
}
