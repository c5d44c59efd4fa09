//! One event queue ordered by (time, sequence number): ties break by insertion order (SimPy's rule).
//!
//! The popped event stays at the top of the heap until the next schedule() overwrites it in place
//! (one sift-down instead of a pop and a push): the usual pattern is a CPU's event handing over to
//! that CPU's next one. The order of events is the same either way, as keys are unique.

use super::Time;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// (time << 64 | seq) as two words: a u128 field would align the entry to 16 bytes (32, not 24).
struct Entry<E> {
    time: u64,
    seq: u64,
    event: E,
}

impl<E> Entry<E> {
    #[inline(always)]
    fn key(&self) -> u128 {
        ((self.time as u128) << 64) | self.seq as u128
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed so that BinaryHeap (a max-heap) pops the earliest (time, seq) first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.key().cmp(&self.key())
    }
}

pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    /// The top of the heap was popped already (see the module comment).
    top_popped: bool,
    next_seq: u64,
    now: Time,
    popped: u64,
    /// An event was scheduled before now: a time sum wrapped past 2^64 ps (see `wrapped`).
    wrapped: bool,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Copy> EventQueue<E> {
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1024),
            top_popped: false,
            next_seq: 0,
            now: 0,
            popped: 0,
            wrapped: false,
        }
    }

    pub fn now(&self) -> Time {
        self.now
    }

    /// Events handled so far (for the benchmark's events-per-second figure).
    pub fn popped(&self) -> u64 {
        self.popped
    }

    /// Simulated time overflowed: a release build wraps `now + d` past 2^64 ps to a time before
    /// now. The run must end with an error, as what follows would be wrong.
    pub fn wrapped(&self) -> bool {
        self.wrapped
    }

    pub fn schedule(&mut self, mut time: Time, event: E) {
        debug_assert!(time >= self.now, "event scheduled in the past");
        if time < self.now {
            // One predictable compare: park the event at the end of time and flag the run.
            self.wrapped = true;
            time = super::NEVER;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let entry = Entry { time, seq, event };
        if self.top_popped {
            self.top_popped = false;
            *self.heap.peek_mut().expect("popped top") = entry;
        } else {
            self.heap.push(entry);
        }
    }

    pub fn pop(&mut self) -> Option<(Time, E)> {
        if self.top_popped {
            self.heap.pop();
        }
        let e = self.heap.peek()?;
        self.top_popped = true;
        self.now = e.time;
        self.popped += 1;
        Some((self.now, e.event))
    }

    /// Move the clock to `t` without an event: only when nothing is queued before or at `t`,
    /// so no event's order can change (the caller checked with `due_by`).
    pub fn advance_to(&mut self, t: Time) {
        debug_assert!(t >= self.now && !self.due_by(t));
        // As in schedule(): a wrapped sum must not move the clock back.
        if t < self.now {
            self.wrapped = true;
            return;
        }
        self.now = t;
    }

    /// An event is queued for `t` or earlier: it would run before anything scheduled at `t` now.
    pub fn due_by(&self, t: Time) -> bool {
        self.peek_time().is_some_and(|p| p <= t)
    }

    pub fn peek_time(&self) -> Option<Time> {
        if !self.top_popped {
            return self.heap.peek().map(|e| e.time);
        }
        // The earliest event after the popped top is one of its two children.
        let h = self.heap.as_slice();
        let next = h.get(1..3.min(h.len()))?.iter().map(|e| e.key()).min()?;
        Some((next >> 64) as Time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Release builds only: debug builds stop at the overflowing sum or the debug_assert first.
    #[cfg(not(debug_assertions))]
    #[test]
    fn a_time_before_now_flags_the_queue_instead_of_reordering_it() {
        let mut q = EventQueue::new();
        q.schedule(10, 'a');
        assert_eq!(q.pop(), Some((10, 'a')));
        q.schedule(10u64.wrapping_add(u64::MAX), 'w');
        assert!(q.wrapped());
        assert_eq!(q.pop(), Some((crate::engine::NEVER, 'w')));
    }

    #[test]
    fn ties_break_by_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(5, 'b');
        q.schedule(3, 'a');
        q.schedule(5, 'c');
        q.schedule(5, 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['a', 'b', 'c', 'd']);
        assert_eq!(q.now(), 5);
    }

    #[test]
    fn scheduling_after_a_pop_keeps_the_order() {
        let mut q = EventQueue::new();
        for (t, e) in [(4, 'x'), (2, 'a'), (9, 'z'), (4, 'y')] {
            q.schedule(t, e);
        }
        assert_eq!(q.pop(), Some((2, 'a')));
        assert_eq!(q.peek_time(), Some(4));
        q.schedule(3, 'b');
        q.schedule(4, 'c');
        assert_eq!(q.peek_time(), Some(3));
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['b', 'x', 'y', 'c', 'z']);
        assert_eq!(q.peek_time(), None);
    }

    #[test]
    fn interleaved_schedules_and_pops_come_out_in_key_order() {
        // Against a sorted reference: every pop is the least (time, insertion) pair left.
        let mut q = EventQueue::new();
        let mut reference: Vec<(Time, u32)> = Vec::new();
        let mut x: u64 = 12345;
        let mut next = 0u32;
        for round in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if round % 3 != 2 || reference.is_empty() {
                let t = q.now() + (x >> 59);
                q.schedule(t, next);
                reference.push((t, next));
                next += 1;
            } else {
                let i = (0..reference.len()).min_by_key(|&i| reference[i]).unwrap();
                assert_eq!(q.pop(), Some(reference.remove(i)));
            }
        }
        reference.sort();
        let rest: Vec<(Time, u32)> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, reference);
    }
}
