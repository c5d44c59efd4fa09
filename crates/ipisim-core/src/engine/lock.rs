//! A spinlock as a queue in time: whoever takes it waits until the previous holder is done.
//! Acquisitions are served in the order the simulation reaches them (ties by event sequence),
//! except that one made for a time before the latest holder's is served first if it fits in
//! the gap before it: a step that takes a lock part-way through (3.8's sender takes its cfd line
//! and then call_function.lock) takes it at a time later than events the simulation has not
//! reached yet, and a ticket lock serves by time.

use super::Time;

#[derive(Debug, Clone, Default)]
pub struct SpinLock {
    /// When the current holder releases it (and the last load of the line is served).
    free_at: Time,
    /// When the last write to the line (or hold of the lock) ends: loads wait only for that.
    written_at: Time,
    /// The CPU of the last holder: the lock's cache line comes from there.
    last_cpu: usize,
    /// Another CPU whose cache still has a copy of the line (the one it was read from), or
    /// `last_cpu` itself when that has it alone.
    copy: usize,
    pub acquisitions: u64,
    pub contended: u64,
    /// Total time spent spinning for it.
    pub wait: Time,
    /// When the latest holder asked for it and when it takes it, and before that, when it was
    /// free again after the holder before (whose CPU then held its line): a request that comes
    /// in simulation order after the latest one but was made before it in time is served in that
    /// gap if it fits there (it has the earlier ticket).
    asked_at: Time,
    taken_at: Time,
    gap_from: Time,
    gap_cpu: usize,
}

impl SpinLock {
    /// A free lock (or line) whose cache line is in `cpu`'s cache.
    pub fn on(cpu: usize) -> SpinLock {
        SpinLock {
            last_cpu: cpu,
            copy: cpu,
            ..SpinLock::default()
        }
    }

    /// A free line in no CPU's cache yet: its first access moves nothing between CPUs (a load
    /// from memory, not a line transfer).
    pub fn in_memory() -> SpinLock {
        SpinLock {
            last_cpu: IN_MEMORY,
            copy: IN_MEMORY,
            gap_cpu: IN_MEMORY,
            ..SpinLock::default()
        }
    }

    /// Take the lock at `now` on `cpu` and hold it for `hold`; `line(from, to)` is the cost of
    /// moving its cache line between CPUs, and a lock that is busy when asked for moves it
    /// `handoff` times on its way from the holder (a spinning waiter's load, then its write).
    /// Returns the time from `now` until it is acquired.
    pub fn acquire(
        &mut self,
        now: Time,
        cpu: usize,
        hold: Time,
        handoff: Time,
        line: impl Fn(usize, usize) -> Time,
    ) -> Time {
        self.acquisitions += 1;
        self.serve(now, cpu, hold, handoff, line)
    }

    /// A load from the line at `now` on `cpu` (3.8's cfd_data, kept as a lock with no hold, or a
    /// lock's line read without taking it): it waits for the write (or hold) in progress, not for
    /// other loads, and comes over from the last CPU to touch it; the next writer waits for it
    /// and must take the line back from `cpu`. So the loads and writes of many CPUs take turns.
    /// Returns the time from `now` until the data is here.
    pub fn read(&mut self, now: Time, cpu: usize, line: impl Fn(usize, usize) -> Time) -> Time {
        if cpu == self.last_cpu || cpu == self.copy {
            return 0;
        }
        self.serve(now, cpu, 0, 0, line)
    }

    /// Serve a write (or a lock taken) held for `hold` whose wait for a holder ends in `handoff`
    /// transfers, or a load (`handoff` 0).
    fn serve(
        &mut self,
        now: Time,
        cpu: usize,
        hold: Time,
        handoff: Time,
        line: impl Fn(usize, usize) -> Time,
    ) -> Time {
        let write = handoff > 0;
        // A CPU never spins on its own hold: the last holder asking again for the same instant
        // is the next part of one step that asks for each at the step's start (lru_add_drain()'s
        // add round, then folios_put()'s release round), so it asks as its hold ends.
        let now = match write && cpu == self.last_cpu && now == self.asked_at {
            true => now.max(self.free_at),
            false => now,
        };
        // A waiter's line comes over `handoff` times; an access that finds it free, once.
        let moves = |ready: Time| if write && ready > now { handoff } else { 1 };
        // In the gap before the latest holder, if this request has the earlier ticket and fits.
        let gap = (now < self.asked_at)
            .then(|| {
                now.max(self.gap_from) + moves(self.gap_from) * transfer(self.gap_cpu, cpu, &line)
            })
            .filter(|&start| start + hold <= self.taken_at);
        let start = if let Some(start) = gap {
            if self.gap_from > now {
                self.contended += 1;
            }
            (self.gap_from, self.gap_cpu) = (start + hold, cpu);
            start
        } else {
            // A write waits for every access before it; loads side by side do not wait for
            // each other.
            let ready = if write { self.free_at } else { self.written_at };
            if ready > now {
                self.contended += 1;
            }
            // Writing a line that another cache shares takes it from there (the invalidation);
            // a load leaves a copy where it came from.
            let from = match cpu == self.last_cpu {
                true => self.copy,
                false => self.last_cpu,
            };
            let start = now.max(ready) + moves(ready) * transfer(from, cpu, &line);
            (self.gap_from, self.gap_cpu) = (self.free_at, self.last_cpu);
            (self.asked_at, self.taken_at) = (now, start);
            self.free_at = self.free_at.max(start + hold);
            if write {
                self.written_at = start + hold;
            }
            self.copy = if write { cpu } else { self.last_cpu };
            self.last_cpu = cpu;
            start
        };
        self.wait += start - now;
        start - now
    }
}

/// No CPU's cache: `SpinLock::in_memory()`'s line before its first access.
const IN_MEMORY: usize = usize::MAX;

/// The cost of moving a lock's cache line from `from`'s cache to `to`'s (none if it is there,
/// or if it comes from memory).
fn transfer(from: usize, to: usize, line: impl Fn(usize, usize) -> Time) -> Time {
    if from == to || from == IN_MEMORY {
        0
    } else {
        line(from, to)
    }
}

/// No CPU (in `HeldLock`'s small CPU fields).
const NOBODY: u16 = u16::MAX;

/// A spinlock held across steps, for as long as its holder needs it (the PTE lock around
/// ptep_clear_flush, whose IPIs the holder waits for). Waiting CPUs queue in FIFO order, linked
/// through a per-CPU `next` array the caller keeps; each hand-off pays what the caller says.
#[derive(Debug, Clone, Copy)]
pub struct HeldLock {
    holder: u16,
    last_cpu: u16,
    head: u16,
    tail: u16,
    /// CPUs in the queue.
    waiters: u16,
}

impl Default for HeldLock {
    fn default() -> Self {
        HeldLock {
            holder: NOBODY,
            last_cpu: 0,
            head: NOBODY,
            tail: NOBODY,
            waiters: 0,
        }
    }
}

impl HeldLock {
    pub fn held_by(&self) -> Option<usize> {
        (self.holder != NOBODY).then_some(self.holder as usize)
    }

    /// Take the lock on `cpu` if it is free, returning the line transfer; if it is held, queue
    /// `cpu` (linked through `next`) and return None.
    pub fn try_lock(
        &mut self,
        cpu: usize,
        next: &mut [u16],
        line: impl Fn(usize, usize) -> Time,
    ) -> Option<Time> {
        if self.holder == NOBODY {
            return Some(self.take(cpu, line));
        }
        next[cpu] = NOBODY;
        if self.tail == NOBODY {
            self.head = cpu as u16;
        } else {
            next[self.tail as usize] = cpu as u16;
        }
        self.tail = cpu as u16;
        self.waiters += 1;
        None
    }

    /// Release; if a CPU waits, the lock is now its: returns it and `handoff(from, to, waiters)`
    /// (the CPUs that were waiting, it included), the time from the release until it holds it.
    pub fn unlock(
        &mut self,
        next: &[u16],
        handoff: impl Fn(usize, usize, usize) -> Time,
    ) -> Option<(usize, Time)> {
        self.holder = NOBODY;
        if self.head == NOBODY {
            return None;
        }
        let (cpu, waiters) = (self.head as usize, self.waiters as usize);
        self.head = next[cpu];
        self.waiters -= 1;
        if self.head == NOBODY {
            self.tail = NOBODY;
        }
        Some((cpu, self.take(cpu, |a, b| handoff(a, b, waiters))))
    }

    fn take(&mut self, cpu: usize, line: impl Fn(usize, usize) -> Time) -> Time {
        let moved = transfer(self.last_cpu as usize, cpu, line);
        self.holder = cpu as u16;
        self.last_cpu = cpu as u16;
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_taker_waits_for_the_first() {
        let line = |a: usize, b: usize| if a / 2 == b / 2 { 1 } else { 7 };
        let mut l = SpinLock::default();
        assert_eq!(l.acquire(100, 0, 50, 1, line), 0);
        assert_eq!(l.acquire(120, 1, 50, 1, line), 31);
        assert_eq!(l.acquire(500, 2, 10, 1, line), 7);
        assert_eq!((l.acquisitions, l.contended, l.wait), (3, 1, 38));
    }

    #[test]
    fn a_cpu_asking_again_for_the_same_instant_follows_its_own_hold() {
        let line = |a: usize, b: usize| if a == b { 0 } else { 5 };
        let mut l = SpinLock::default();
        // CPU 1 takes it at 0 (its line from CPU 0's cache) and holds it until 15.
        assert_eq!(l.acquire(0, 1, 10, 3, line), 5);
        // The same step's next round, asked for the same instant, starts at 15 with no spin
        // (it spun 15 before 2026-11-30: its own first round, counted twice).
        assert_eq!(l.acquire(0, 1, 10, 3, line), 0);
        assert_eq!((l.contended, l.wait), (0, 5));
        // CPU 2, asking at 3, waits for both rounds: until 25, then three transfers.
        assert_eq!(l.acquire(3, 2, 10, 3, line), 37);
    }

    #[test]
    fn a_queued_waiter_loads_the_released_line_then_takes_it_back() {
        let line = |a: usize, b: usize| if a == b { 0 } else { 5 };
        let mut l = SpinLock::default();
        assert_eq!(l.acquire(0, 0, 10, 3, line), 0);
        // Busy when asked: three transfers after the release (the release's invalidation of the
        // waiter's copy, its load, its atomic): 10 + 3 x 5.
        assert_eq!(l.acquire(3, 1, 10, 3, line), 22);
        // Free when asked: one transfer, as any write.
        assert_eq!(l.acquire(100, 2, 0, 3, line), 5);
        assert_eq!((l.acquisitions, l.contended), (3, 1));
    }

    #[test]
    fn an_earlier_request_fits_in_the_gap_before_a_later_holder() {
        let line = |a: usize, b: usize| if a == b { 0 } else { 5 };
        let mut l = SpinLock::default();
        // CPU 0 holds it over 0..10; CPU 1's loop takes it at 100 (its line comes from CPU 0).
        assert_eq!(l.acquire(0, 0, 10, 1, line), 0);
        assert_eq!(l.acquire(100, 1, 10, 1, line), 5);
        // CPU 2 asks at 50, reached later: served from 55 to 65, before CPU 1 at 105.
        assert_eq!(l.acquire(50, 2, 10, 1, line), 5);
        // CPU 3 asks at 92: 97 + 10 overlaps CPU 1's hold, so it waits behind it (115 + 5).
        assert_eq!(l.acquire(92, 3, 10, 1, line), 28);
        assert_eq!((l.acquisitions, l.contended, l.wait), (4, 1, 38));
    }

    #[test]
    fn a_later_request_keeps_its_ticket_order_even_where_it_would_fit() {
        let line = |a: usize, b: usize| if a == b { 0 } else { 5 };
        let mut l = SpinLock::default();
        assert_eq!(l.acquire(0, 0, 10, 1, line), 0);
        // CPU 1 asks at 5 and takes it at 15, after the holder and its line's transfer.
        assert_eq!(l.acquire(5, 1, 10, 1, line), 10);
        // CPU 0 asks again at 8, after CPU 1 did: behind it (25, then the line back), although
        // it holds the line and a zero-length hold would fit before 15.
        assert_eq!(l.acquire(8, 0, 0, 1, line), 22);
    }

    #[test]
    fn a_load_waits_for_the_write_and_the_next_write_takes_the_line_back() {
        let line = |a: usize, b: usize| if a == b { 0 } else { 5 };
        let mut l = SpinLock::default();
        // CPU 0 writes over 0..10; CPU 1's load at 3 waits for it, then the line comes over.
        assert_eq!(l.acquire(0, 0, 10, 1, line), 0);
        assert_eq!(l.read(3, 1, line), 12);
        // CPU 1 has a copy now; its write must still take the line from CPU 0's cache.
        assert_eq!(l.read(20, 1, line), 0);
        assert_eq!(l.acquire(20, 1, 0, 1, line), 5);
        // CPU 0 loads it again, and CPU 2's write takes it from there.
        assert_eq!(l.read(30, 0, line), 5);
        assert_eq!(l.acquire(40, 2, 0, 1, line), 5);
        // Two loads side by side come over together; the next write waits for both.
        assert_eq!(l.read(50, 3, line), 5);
        assert_eq!(l.read(50, 1, line), 5);
        assert_eq!(l.acquire(50, 0, 0, 1, line), 10);
        assert_eq!(l.acquisitions, 4, "loads are not acquisitions");
    }

    #[test]
    fn held_lock_hands_over_in_arrival_order() {
        let line = |a: usize, b: usize| if a / 2 == b / 2 { 1 } else { 7 };
        let mut next = [0u16; 4];
        let mut l = HeldLock::default();
        assert_eq!(l.try_lock(0, &mut next, line), Some(0));
        assert_eq!(l.try_lock(3, &mut next, line), None);
        assert_eq!(l.try_lock(1, &mut next, line), None);
        assert_eq!(l.held_by(), Some(0));
        // Cross-pair hand-off costs more than within a pair; each is told how many waited.
        let handoff = |a: usize, b: usize, waiters: usize| line(a, b) * 10 + waiters as Time;
        assert_eq!(l.unlock(&next, handoff), Some((3, 72)));
        assert_eq!(l.unlock(&next, handoff), Some((1, 71)));
        assert_eq!(l.unlock(&next, handoff), None);
        assert_eq!(l.held_by(), None);
        assert_eq!(l.try_lock(1, &mut next, line), Some(0));
    }
}
