//! A spinlock as a queue in time: whoever takes it waits until the previous holder is done.
//! Acquisitions are served in the order the simulation reaches them (ties by event sequence).

use super::Time;

#[derive(Debug, Clone, Default)]
pub struct SpinLock {
    /// When the current holder releases it.
    free_at: Time,
    /// The CPU of the last holder: the lock's cache line comes from there.
    last_cpu: usize,
    pub acquisitions: u64,
    pub contended: u64,
    /// Total time spent spinning for it.
    pub wait: Time,
}

impl SpinLock {
    /// The CPU whose cache holds the line now (the last holder).
    pub fn holder(&self) -> usize {
        self.last_cpu
    }

    /// Take the lock at `now` on `cpu` and hold it for `hold`; `line(from, to)` is the cost of
    /// moving its cache line between CPUs. Returns the time from `now` until it is acquired.
    pub fn acquire(
        &mut self,
        now: Time,
        cpu: usize,
        hold: Time,
        line: impl Fn(usize, usize) -> Time,
    ) -> Time {
        let moved = if cpu != self.last_cpu {
            line(self.last_cpu, cpu)
        } else {
            0
        };
        if self.free_at > now {
            self.contended += 1;
        }
        let start = now.max(self.free_at) + moved;
        self.free_at = start + hold;
        self.last_cpu = cpu;
        self.acquisitions += 1;
        self.wait += start - now;
        start - now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_taker_waits_for_the_first() {
        let line = |a: usize, b: usize| if a / 2 == b / 2 { 1 } else { 7 };
        let mut l = SpinLock::default();
        assert_eq!(l.acquire(100, 0, 50, line), 0);
        assert_eq!(l.acquire(120, 1, 50, line), 31);
        assert_eq!(l.acquire(500, 2, 10, line), 7);
        assert_eq!((l.acquisitions, l.contended, l.wait), (3, 1, 38));
    }
}
