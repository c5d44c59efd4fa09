//! Simulated time, the event queue and the seeded RNG. Nothing here knows about kernels.

mod cpumask;
mod line;
mod lock;
mod queue;
mod rng;

pub use cpumask::{CpuMask, MAX_CPUS};
pub use line::SharedLine;
pub use lock::{HeldLock, SpinLock};
pub use queue::EventQueue;
pub use rng::Rng;

/// A CPU's number, 0..ncpus.
pub type CpuId = usize;
/// A task's number, in the order tasks were created.
pub type TaskId = usize;

/// Simulated time in picoseconds: fine enough that cycle costs at any clock rate round by < 1 ps.
pub type Time = u64;

pub const PS_PER_NS: Time = 1_000;
pub const PS_PER_US: Time = 1_000_000;
pub const PS_PER_MS: Time = 1_000_000_000;
pub const PS_PER_S: Time = 1_000_000_000_000;

/// A time that never comes (an open-ended spin, an unbounded run).
pub const NEVER: Time = Time::MAX;

/// Seconds as f64, for results only (never fed back into the simulation).
pub fn secs(t: Time) -> f64 {
    t as f64 / PS_PER_S as f64
}

/// Hint the CPU to load `x`'s cache line early: a walk over scattered structs overlaps its misses.
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults and reads nothing the program sees.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (x as *const T).cast(),
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
