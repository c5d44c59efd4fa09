//! How TLB flushes are done: the per-CPU hardware TLB, and each architecture's flush paths.

pub mod powerpc;
mod tlb;
pub mod x86;

pub use tlb::{Tlb, TlbEntry};
