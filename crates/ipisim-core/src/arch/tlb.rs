//! The hardware TLB of one CPU: a set-associative cache of 4 KiB translations tagged by ASID slot.
//! Flushing a whole ASID is O(1) (an epoch bump), as a CR3 write is on real hardware.

pub const NR_ASID_SLOTS: usize = 6;

/// The tag of translations made under a global ASID (AMD INVLPGB, 6.15): one more slot after the
/// dynamic ones. A CPU caches one global ASID's translations at a time in the model (switching to
/// another global ASID empties the slot, a refill cost only); the kernel's global ASIDs are
/// numbers from TLB_NR_DYN_ASIDS up, identical on every CPU.
pub const GLOBAL_SLOT: u8 = NR_ASID_SLOTS as u8;

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlbEntry {
    pub pfn: u32,
    pub writable: bool,
    pub dirty: bool,
}

const WRITABLE: u32 = 1;
const DIRTY: u32 = 2;
/// A key no translation has (an empty or INVLPG'd way).
const NO_KEY: u64 = u64::MAX;

pub struct Tlb {
    set_mask: usize,
    ways: usize,
    /// Per way: vpn << 3 | asid, compared first so a lookup is one scan of a few integers.
    keys: Vec<u64>,
    /// Per way: frame, and (the ASID's epoch when filled) << 2 | dirty | writable.
    vals: Vec<(u32, u32)>,
    /// An entry filled under an older epoch of its ASID has been flushed.
    epoch: [u32; NR_ASID_SLOTS + 1],
    /// Round-robin victim per set.
    victim: Vec<u8>,
}

fn key(asid: u8, vpn: u64) -> u64 {
    (vpn << 3) | asid as u64
}

impl Tlb {
    pub fn new(entries: usize, ways: usize) -> Tlb {
        let sets = entries / ways;
        Tlb {
            set_mask: sets - 1,
            ways,
            keys: vec![NO_KEY; entries],
            vals: vec![(0, 0); entries],
            epoch: [0; NR_ASID_SLOTS + 1],
            victim: vec![0; sets],
        }
    }

    fn set(&self, vpn: u64) -> usize {
        ((vpn as usize) & self.set_mask) * self.ways
    }

    /// Look up a translation. Returns what was found and the slot a fill should use: the page's
    /// own way if present, else the set's round-robin victim.
    pub fn access(&mut self, asid: u8, vpn: u64) -> (Option<TlbEntry>, usize) {
        let (base, k) = (self.set(vpn), key(asid, vpn));
        if let Some(i) = self.keys[base..base + self.ways]
            .iter()
            .position(|&x| x == k)
        {
            let (pfn, ef) = self.vals[base + i];
            let live = ef >> 2 == self.epoch[asid as usize];
            let hit = live.then_some(TlbEntry {
                pfn,
                writable: ef & WRITABLE != 0,
                dirty: ef & DIRTY != 0,
            });
            return (hit, base + i);
        }
        let set = base / self.ways;
        let w = self.victim[set] as usize;
        self.victim[set] = ((w + 1) % self.ways) as u8;
        (None, base + w)
    }

    /// A live translation for the page, if any (no replacement state changes).
    pub fn probe(&self, asid: u8, vpn: u64) -> Option<TlbEntry> {
        let (base, k) = (self.set(vpn), key(asid, vpn));
        (base..base + self.ways)
            .find(|&i| self.keys[i] == k && self.vals[i].1 >> 2 == self.epoch[asid as usize])
            .map(|i| {
                let (pfn, ef) = self.vals[i];
                TlbEntry {
                    pfn,
                    writable: ef & WRITABLE != 0,
                    dirty: ef & DIRTY != 0,
                }
            })
    }

    pub fn lookup(&mut self, asid: u8, vpn: u64) -> Option<TlbEntry> {
        self.access(asid, vpn).0
    }

    /// Fill `slot` (from [`Tlb::access`]) with a translation.
    pub fn fill_at(
        &mut self,
        slot: usize,
        asid: u8,
        vpn: u64,
        pfn: u32,
        writable: bool,
        dirty: bool,
    ) {
        self.keys[slot] = key(asid, vpn);
        self.vals[slot] = (
            pfn,
            (self.epoch[asid as usize] << 2) | writable as u32 | (dirty as u32) << 1,
        );
    }

    pub fn fill(&mut self, asid: u8, vpn: u64, pfn: u32, writable: bool, dirty: bool) {
        let (_, slot) = self.access(asid, vpn);
        self.fill_at(slot, asid, vpn, pfn, writable, dirty);
    }

    /// INVLPG: drop one page's translation in one ASID.
    pub fn flush_one(&mut self, asid: u8, vpn: u64) {
        let (base, k) = (self.set(vpn), key(asid, vpn));
        for x in &mut self.keys[base..base + self.ways] {
            if *x == k {
                *x = NO_KEY;
            }
        }
    }

    /// sfence.vma with no address and no ASID (RISC-V): drop every translation.
    pub fn flush_all(&mut self) {
        self.keys.fill(NO_KEY);
    }

    /// A flushing CR3 write: drop every translation of one ASID.
    pub fn flush_asid(&mut self, asid: u8) {
        // Epochs live in 30 bits; on a wrap, empty the whole TLB so no old entry revives.
        let e = &mut self.epoch[asid as usize];
        *e = (*e + 1) & ((1 << 30) - 1);
        if *e == 0 {
            self.keys.fill(NO_KEY);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_lookup_flush() {
        let mut t = Tlb::new(64, 4);
        assert!(t.lookup(0, 0).is_none());
        t.fill(0, 100, 7, true, true);
        t.fill(1, 100, 8, false, false);
        assert_eq!(t.lookup(0, 100).unwrap().pfn, 7);
        assert_eq!(
            t.lookup(1, 100),
            Some(TlbEntry {
                pfn: 8,
                writable: false,
                dirty: false
            })
        );
        t.flush_one(0, 100);
        assert!(t.lookup(0, 100).is_none());
        assert!(t.lookup(1, 100).is_some());
        t.flush_asid(1);
        assert!(t.lookup(1, 100).is_none());
        // A refill after a flush reuses the page's own way.
        t.fill(1, 100, 9, true, false);
        assert_eq!(t.lookup(1, 100).unwrap().pfn, 9);
        // A full set evicts round-robin but keeps the newest entry.
        for v in 0..10u64 {
            t.fill(0, v * 16, v as u32, true, true);
        }
        assert_eq!(t.lookup(0, 9 * 16).unwrap().pfn, 9);
    }
}
