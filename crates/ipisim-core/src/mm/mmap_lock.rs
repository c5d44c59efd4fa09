//! mmap_lock, the mm's rw_semaphore, as kernel/locking/rwsem.c (5.x-6.x) hands it out: readers
//! share it, a writer has it alone, and sleepers queue in order. What the model follows:
//! - down_read() takes it if no writer holds it and nobody waits, else it queues (the fast path;
//!   rwsem_down_read_slowpath() steals it from a woken writer that has not run yet, which the
//!   hand-off below leaves no room for);
//! - down_write() takes it when nobody holds it, else it queues (the optimistic spin on a
//!   running owner is not modelled: the writer sleeps);
//! - the last up_read() and up_write() wake the first waiter: a writer alone, which is handed the
//!   lock (RWSEM_FLAG_HANDOFF's outcome), or every queued reader (rwsem_mark_wake(), up to 256),
//!   each handed its share;
//! - mmap_write_downgrade() (munmap's, since 4.20) turns the writer into a reader and hands the
//!   lock to the queued readers if one is first;
//! - every down_*() and up_*() is an atomic read-modify-write of the rwsem's `count` word
//!   (rwsem_read_trylock()'s atomic_long_add_return_acquire(), __up_read()'s
//!   atomic_long_add_return_release(), ...), so the CPUs of one mm's threads take turns for its
//!   cache line (`line`), even when nobody ever waits for the lock itself. A VMA's lock word
//!   (`Mm::vma_locks`) is another such line.

use std::collections::VecDeque;

use crate::engine::{SpinLock, TaskId};

/// rwsem_mark_wake()'s MAX_READERS_WAKEUP.
const MAX_READERS_WAKEUP: usize = 0x100;

#[derive(Debug, Default)]
pub struct MmapLock {
    writer: Option<TaskId>,
    readers: u32,
    /// Tasks sleeping for it, in order: (task, wants it for writing).
    waiters: VecDeque<(TaskId, bool)>,
    /// Readers woken with their share already taken (rwsem_mark_wake() adds it for them); a
    /// woken writer finds itself in `writer`.
    granted: Vec<TaskId>,
    /// The tasks the last release or downgrade woke: the caller wakes them.
    pub woken: Vec<TaskId>,
    /// Times a reader and a writer went to sleep for it.
    pub read_sleeps: u64,
    pub write_sleeps: u64,
    /// The cache line of `count`: each down and up is a write of it (no hold: the atomic alone).
    pub line: SpinLock,
}

impl MmapLock {
    /// down_read(): true if `t` holds it for reading now; false: `t` is queued and sleeps.
    pub fn down_read(&mut self, t: TaskId) -> bool {
        if self.take_grant(t) {
            return true;
        }
        if self.writer.is_none() && self.waiters.is_empty() {
            self.readers += 1;
            return true;
        }
        self.waiters.push_back((t, false));
        self.read_sleeps += 1;
        false
    }

    /// down_write(): true if `t` holds it for writing now; false: `t` is queued and sleeps.
    pub fn down_write(&mut self, t: TaskId) -> bool {
        if self.writer == Some(t) {
            return true;
        }
        if self.writer.is_none() && self.readers == 0 {
            self.writer = Some(t);
            return true;
        }
        self.waiters.push_back((t, true));
        self.write_sleeps += 1;
        false
    }

    /// up_read(): the last reader out wakes the first waiter.
    pub fn up_read(&mut self) {
        debug_assert!(
            self.readers > 0,
            "up_read() of an mmap_lock no reader holds"
        );
        self.woken.clear();
        self.readers -= 1;
        if self.readers == 0 {
            self.mark_wake(true);
        }
    }

    /// up_write().
    pub fn up_write(&mut self, t: TaskId) {
        debug_assert_eq!(
            self.writer,
            Some(t),
            "up_write() by a task that does not hold it"
        );
        self.writer = None;
        self.mark_wake(true);
    }

    /// mmap_write_downgrade(): the writer holds it for reading from now on.
    pub fn downgrade(&mut self, t: TaskId) {
        debug_assert_eq!(
            self.writer,
            Some(t),
            "downgrade by a task that does not hold it"
        );
        self.writer = None;
        self.readers += 1;
        self.mark_wake(false);
    }

    fn take_grant(&mut self, t: TaskId) -> bool {
        match self.granted.iter().position(|&g| g == t) {
            Some(i) => {
                self.granted.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// rwsem_mark_wake(): a writer first is handed the lock if it is free (`any`: not after a
    /// downgrade); readers first, every queued reader is.
    fn mark_wake(&mut self, any: bool) {
        self.woken.clear();
        match self.waiters.front() {
            Some(&(w, true)) if any && self.writer.is_none() && self.readers == 0 => {
                self.waiters.pop_front();
                self.writer = Some(w);
                self.woken.push(w);
            }
            None | Some(&(_, true)) => {}
            Some(&(_, false)) => {
                let mut i = 0;
                while i < self.waiters.len() && self.woken.len() < MAX_READERS_WAKEUP {
                    let (r, write) = self.waiters[i];
                    if write {
                        i += 1;
                        continue;
                    }
                    self.waiters.remove(i);
                    self.readers += 1;
                    self.granted.push(r);
                    self.woken.push(r);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MmapLock;

    /// Readers share it; a writer queues behind them and is handed it by the last one out;
    /// readers that come while it waits and others read queue behind it, and its up_write()
    /// hands the lock to all of them at once.
    #[test]
    fn a_waiting_writer_holds_off_new_readers_until_it_is_done() {
        let mut l = MmapLock::default();
        assert!(l.down_read(1) && l.down_read(2));
        assert!(!l.down_write(3), "readers hold it");
        assert!(
            !l.down_read(4) && !l.down_read(5),
            "a writer waits and others read"
        );
        l.up_read();
        assert!(l.woken.is_empty());
        l.up_read();
        assert_eq!(l.woken, [3], "the last reader out hands it to the writer");
        assert!(l.down_write(3));
        assert!(!l.down_read(6));
        l.up_write(3);
        assert_eq!(l.woken, [4, 5, 6], "every queued reader, in order");
        assert!(l.down_read(4) && l.down_read(5) && l.down_read(6));
        assert_eq!((l.readers, l.read_sleeps, l.write_sleeps), (3, 3, 1));
    }

    /// A writer queued behind a writer is handed the lock by its up_write(). A downgrade lets the
    /// queued readers in but not the writer between them, which the last reader out wakes.
    #[test]
    fn a_writer_is_handed_the_lock_and_a_downgrade_lets_readers_in() {
        let mut l = MmapLock::default();
        assert!(l.down_write(1));
        assert!(!l.down_write(2));
        l.up_write(1);
        assert_eq!(l.woken, [2]);
        assert!(!l.down_read(3), "the lock is the woken writer's");
        assert!(l.down_write(2));
        l.up_write(2);
        assert_eq!(l.woken, [3]);
        let mut l = MmapLock::default();
        assert!(l.down_write(1));
        assert!(!l.down_read(2) && !l.down_write(3) && !l.down_read(4));
        l.downgrade(1);
        assert_eq!(l.woken, [2, 4], "the readers, not the writer between them");
        assert!(l.down_read(2) && l.down_read(4));
        l.up_read();
        l.up_read();
        assert!(l.woken.is_empty(), "the downgraded writer still reads");
        l.up_read();
        assert_eq!(l.woken, [3]);
    }
}
