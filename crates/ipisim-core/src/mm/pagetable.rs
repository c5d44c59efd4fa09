//! Page-table entries and PTE tables.

use super::PTRS_PER_PTE;

/// A PTE: present, writable, dirty, accessed bits and a frame number.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pte(u64);

impl Pte {
    pub const NONE: Pte = Pte(0);
    const PRESENT: u64 = 1;
    const WRITE: u64 = 2;
    const DIRTY: u64 = 4;
    const ACCESSED: u64 = 8;
    /// Software bit: the frame is an anonymous page of this mapping (vm_normal_page() finds a
    /// PageAnon page), so zapping the PTE frees it. Page-cache pages and the zero page stay.
    const ANON: u64 = 1 << 9;

    /// A PTE mapping an anonymous page this mm owns.
    pub fn anon(pfn: u32, write: bool, dirty: bool) -> Pte {
        Pte(Self::new(pfn, write, dirty).0 | Self::ANON)
    }

    pub fn new(pfn: u32, write: bool, dirty: bool) -> Pte {
        let mut v = Self::PRESENT | Self::ACCESSED | ((pfn as u64) << 12);
        if write {
            v |= Self::WRITE;
        }
        if dirty {
            v |= Self::DIRTY;
        }
        Pte(v)
    }

    pub fn present(self) -> bool {
        self.0 & Self::PRESENT != 0
    }
    pub fn write(self) -> bool {
        self.0 & Self::WRITE != 0
    }
    pub fn dirty(self) -> bool {
        self.0 & Self::DIRTY != 0
    }
    pub fn is_anon(self) -> bool {
        self.0 & Self::ANON != 0
    }
    pub fn pfn(self) -> u32 {
        (self.0 >> 12) as u32
    }
    pub fn wrprotect(self) -> Pte {
        Pte(self.0 & !Self::WRITE)
    }
    pub fn mkdirty(self) -> Pte {
        Pte(self.0 | Self::DIRTY)
    }
}

/// One page of PTEs (one PMD's worth of 4 KiB mappings) and how many are present.
#[derive(Clone)]
pub struct PteTable {
    pub pte: [Pte; PTRS_PER_PTE as usize],
    pub present: u16,
}

impl Default for PteTable {
    fn default() -> Self {
        PteTable {
            pte: [Pte::NONE; PTRS_PER_PTE as usize],
            present: 0,
        }
    }
}
