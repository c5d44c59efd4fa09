//! A spinlock as a queue in time: whoever takes it waits until the previous holder is done.
//! Acquisitions are served in the order the simulation reaches them (ties by event sequence).

use super::Time;

#[derive(Debug, Clone, Default)]
pub struct SpinLock {
    /// When the current holder releases it.
    free_at: Time,
    /// The node of the last holder: a handover across nodes moves the lock's cache line further.
    last_node: usize,
    pub acquisitions: u64,
    pub contended: u64,
    /// Total time spent spinning for it.
    pub wait: Time,
}

impl SpinLock {
    /// Take the lock at `now` from `node`, hold it for `hold`; `handover` is the cache-line cost
    /// when the last holder was on another node. Returns the spin time before it was acquired.
    pub fn acquire(&mut self, now: Time, node: usize, hold: Time, handover: Time) -> Time {
        let moved = if node != self.last_node { handover } else { 0 };
        let start = now.max(self.free_at) + moved;
        let wait = start - now;
        self.free_at = start + hold;
        self.last_node = node;
        self.acquisitions += 1;
        if start > now + moved {
            self.contended += 1;
        }
        self.wait += wait;
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_taker_waits_for_the_first() {
        let mut l = SpinLock::default();
        assert_eq!(l.acquire(100, 0, 50, 0), 0);
        assert_eq!(l.acquire(120, 0, 50, 0), 30);
        assert_eq!(l.acquire(500, 1, 10, 7), 7);
        assert_eq!((l.acquisitions, l.contended, l.wait), (3, 1, 37));
    }
}
