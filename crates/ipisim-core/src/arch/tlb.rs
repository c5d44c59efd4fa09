//! The hardware TLB of one CPU: a set-associative cache of 4 KiB translations tagged by ASID slot.
//! Flushing a whole ASID is O(1) (an epoch bump), as a CR3 write is on real hardware.

pub const NR_ASID_SLOTS: usize = 6;

/// One cached translation, packed to 16 bytes: (vpn << 3 | asid) as the key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Entry {
    key: u64,
    pfn: u32,
    /// The ASID's epoch when filled (an older epoch means flushed), and two flag bits.
    epoch_flags: u32,
}

const WRITABLE: u32 = 1;
const DIRTY: u32 = 2;

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlbEntry {
    pub pfn: u32,
    pub writable: bool,
    pub dirty: bool,
}

pub struct Tlb {
    set_mask: usize,
    ways: usize,
    entries: Vec<Entry>,
    /// Epochs start at 1 so that an all-zero entry is never live.
    epoch: [u32; NR_ASID_SLOTS],
    /// Round-robin victim pointer per set.
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
            entries: vec![Entry::default(); entries],
            epoch: [1; NR_ASID_SLOTS],
            victim: vec![0; sets],
        }
    }

    fn set(&self, vpn: u64) -> usize {
        ((vpn as usize) & self.set_mask) * self.ways
    }

    fn live(&self, e: &Entry, k: u64) -> bool {
        e.key == k && e.epoch_flags >> 2 == self.epoch[(k & 7) as usize] && e.epoch_flags != 0
    }

    pub fn lookup(&self, asid: u8, vpn: u64) -> Option<TlbEntry> {
        let (base, k) = (self.set(vpn), key(asid, vpn));
        self.entries[base..base + self.ways]
            .iter()
            .find(|e| self.live(e, k))
            .map(|e| TlbEntry {
                pfn: e.pfn,
                writable: e.epoch_flags & WRITABLE != 0,
                dirty: e.epoch_flags & DIRTY != 0,
            })
    }

    /// Look up a translation. Returns what was found, and the slot a fill should use: the hit's
    /// own slot, else a dead entry, else the set's round-robin victim.
    pub fn access(&mut self, asid: u8, vpn: u64) -> (Option<TlbEntry>, usize) {
        let (base, k) = (self.set(vpn), key(asid, vpn));
        let mut dead = None;
        for (i, e) in self.entries[base..base + self.ways].iter().enumerate() {
            let live = e.epoch_flags >> 2 == self.epoch[(e.key & 7) as usize] && e.epoch_flags != 0;
            if e.key == k && live {
                let hit = TlbEntry {
                    pfn: e.pfn,
                    writable: e.epoch_flags & WRITABLE != 0,
                    dirty: e.epoch_flags & DIRTY != 0,
                };
                return (Some(hit), base + i);
            }
            if !live && dead.is_none() {
                dead = Some(base + i);
            }
        }
        let slot = dead.unwrap_or_else(|| {
            let set = base / self.ways;
            let w = self.victim[set] as usize % self.ways;
            self.victim[set] = ((w + 1) % self.ways) as u8;
            base + w
        });
        (None, slot)
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
        let flags = (self.epoch[asid as usize] << 2) | (writable as u32) | ((dirty as u32) << 1);
        self.entries[slot] = Entry {
            key: key(asid, vpn),
            pfn,
            epoch_flags: flags,
        };
    }

    pub fn fill(&mut self, asid: u8, vpn: u64, pfn: u32, writable: bool, dirty: bool) {
        let (_, slot) = self.access(asid, vpn);
        self.fill_at(slot, asid, vpn, pfn, writable, dirty);
    }

    /// INVLPG: drop one page's translation in one ASID.
    pub fn flush_one(&mut self, asid: u8, vpn: u64) {
        let (base, k) = (self.set(vpn), key(asid, vpn));
        for e in &mut self.entries[base..base + self.ways] {
            if e.key == k {
                e.epoch_flags = 0;
            }
        }
    }

    /// A flushing CR3 write: drop every translation of one ASID.
    pub fn flush_asid(&mut self, asid: u8) {
        // Epochs live in 30 bits; after a wrap, clear the whole TLB so no old entry revives.
        let e = &mut self.epoch[asid as usize];
        *e = (*e + 1) & ((1 << 30) - 1);
        if *e == 0 {
            *e = 1;
            self.entries.fill(Entry::default());
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
        // A full set evicts round-robin but keeps the newest entry.
        for v in 0..10u64 {
            t.fill(0, v * 16, v as u32, true, true);
        }
        assert_eq!(t.lookup(0, 9 * 16).unwrap().pfn, 9);
    }
}
