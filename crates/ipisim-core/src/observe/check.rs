//! The TLB-coherence checker. Every user access that hits in a CPU's TLB is checked against the
//! page tables and the frames' owners, and so is every free and every pageout: no CPU may reach
//! a freed frame, write a page that was already written out, or use the old frame of a migrated
//! page (the invariants of try_to_unmap_flush() and of migrate_pages_batch(), 7e12beb8ca2a).
//! A ring of recent page events gives each violation its history.

use crate::config::{named_enum, params, Kind as ParamKind};
use crate::engine::{secs, CpuId, Time};
use serde_json::{json, Value};

params! {
    /// The checker's switch as declared (check.*).
    #[derive(Debug, Clone)]
    pub struct CheckParams;
    pub const PARAMS = {
        enabled: bool = "check.enabled", ParamKind::Bool, "", "true", "check every TLB hit, free and pageout for a stale translation (the TLB-coherence checker); false (`--no-check`) skips it";
    }
}

named_enum! {
    /// What went wrong.
    Violation {
        /// A translation reached a frame that was freed (or reused), or survived the free.
        UseAfterFree = "use-after-free",
        /// A write that the kernel cannot see: through a stale entry to a page already written
        /// out or migrated away, or a writable entry alive when pageout starts.
        LostWrite = "lost-write",
        /// A read of a migrated page's old frame.
        StaleRead = "stale-read",
    }
}

/// Where a violation was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// A user load or store that hit in the TLB.
    Access { write: bool },
    /// The page was freed while a CPU still cached a translation to it.
    Free,
    /// pageout() started while a CPU still cached a writable translation to the page.
    Pageout,
}

/// A page event the history keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageEvent {
    /// try_to_unmap_one / try_to_migrate_one cleared the PTE; `batch` is the deferred flush batch
    /// it joined (0: flushed at once).
    Unmap { batch: u32 },
    /// The PTE was cleared and no flush will follow (the debug policy reclaim_flush = none).
    UnmapNoFlush,
    /// try_to_unmap_flush() of a batch.
    BatchFlush { batch: u32 },
    /// pageout() wrote the page.
    Pageout,
    /// The frame went back to the allocator.
    Free,
    /// migrate_folio_move(): copied to frame `to` and the PTE now points there.
    MigrateTo { to: u32 },
}

impl Site {
    fn name(self) -> &'static str {
        match self {
            Site::Access { .. } => "access",
            Site::Free => "free",
            Site::Pageout => "pageout",
        }
    }
    fn index(self) -> usize {
        match self {
            Site::Access { .. } => 0,
            Site::Free => 1,
            Site::Pageout => 2,
        }
    }
}

impl PageEvent {
    fn json(self) -> Value {
        match self {
            PageEvent::Unmap { batch: 0 } => json!("unmapped, flushed at once"),
            PageEvent::Unmap { batch } => {
                json!(format!("unmapped, flush deferred in batch {batch}"))
            }
            PageEvent::UnmapNoFlush => json!("unmapped, never flushed (reclaim_flush = none)"),
            PageEvent::BatchFlush { batch } => json!(format!("batch {batch} flushed")),
            PageEvent::Pageout => json!("written out (pageout)"),
            PageEvent::Free => json!("freed"),
            PageEvent::MigrateTo { to } => json!(format!("migrated to pfn {to:#x}, PTE restored")),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Record {
    time: Time,
    cpu: u32,
    /// The frame, or u32::MAX for a batch flush.
    pfn: u32,
    what: PageEvent,
}

/// How many recent events the history ring keeps, and how many violations of each site (access,
/// free, pageout) are reported in full: the first ones.
const RING: usize = 4096;
const REPORTED: usize = 4;

#[derive(Debug, Clone)]
struct Report {
    kind: Violation,
    site: Site,
    cpu: CpuId,
    time: Time,
    mm: usize,
    vpn: u64,
    /// The frame the stale translation points at.
    pfn: u32,
    history: Vec<Record>,
    recent: Vec<Record>,
}

pub struct Checker {
    pub enabled: bool,
    ring: Vec<Record>,
    next: usize,
    /// The last deferred-flush batch number handed out.
    pub batches: u32,
    counts: [u64; Violation::ALL.len()],
    /// Violations by site: access, free, pageout.
    sites: [u64; 3],
    reports: Vec<Report>,
}

impl Checker {
    pub fn new(enabled: bool) -> Checker {
        Checker {
            enabled,
            ring: Vec::with_capacity(if enabled { RING } else { 0 }),
            next: 0,
            batches: 0,
            counts: [0; Violation::ALL.len()],
            sites: [0; 3],
            reports: Vec::new(),
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The events of the ring, oldest first.
    fn in_order(&self) -> impl Iterator<Item = &Record> {
        let (new, old) = self.ring.split_at(self.next.min(self.ring.len()));
        old.iter().chain(new)
    }
}

impl Checker {
    /// Remember a page event at `time` for the histories of later violations.
    pub fn record(&mut self, time: Time, cpu: CpuId, pfn: u32, what: PageEvent) {
        if !self.enabled {
            return;
        }
        let r = Record {
            time,
            cpu: cpu as u32,
            pfn,
            what,
        };
        if self.ring.len() < RING {
            self.ring.push(r);
        } else {
            self.ring[self.next] = r;
        }
        self.next = (self.next + 1) % RING;
    }

    /// Report a violation at `time` on `cpu` of the translation (mm, vpn) -> pfn: counted always,
    /// described in full for the first few.
    pub fn violation(
        &mut self,
        time: Time,
        kind: Violation,
        site: Site,
        cpu: CpuId,
        (mm, vpn, pfn): (usize, u64, u32),
    ) {
        self.counts[kind as usize] += 1;
        self.sites[site.index()] += 1;
        if self.sites[site.index()] > REPORTED as u64 {
            return;
        }
        let batches: Vec<u32> = self
            .in_order()
            .filter_map(|r| match r.what {
                PageEvent::Unmap { batch } if r.pfn == pfn && batch != 0 => Some(batch),
                _ => None,
            })
            .collect();
        let history = self
            .in_order()
            .filter(|r| {
                r.pfn == pfn
                    || matches!(r.what, PageEvent::MigrateTo { to } if to == pfn)
                    || matches!(r.what, PageEvent::BatchFlush { batch } if batches.contains(&batch))
            })
            .copied()
            .collect();
        let recent = self
            .in_order()
            .skip(self.ring.len().saturating_sub(8))
            .copied()
            .collect();
        self.reports.push(Report {
            kind,
            site,
            cpu,
            time,
            mm,
            vpn,
            pfn,
            history,
            recent,
        });
    }
}

fn record_json(r: &Record) -> Value {
    let mut v = json!({"time_s": secs(r.time), "cpu": r.cpu, "event": r.what.json()});
    if r.pfn != u32::MAX {
        v["pfn"] = json!(format!("{:#x}", r.pfn));
    }
    v
}

/// The result's `check` section.
pub fn to_json(c: &Checker) -> Value {
    let counts: serde_json::Map<String, Value> = Violation::ALL
        .iter()
        .map(|&k| (k.name().into(), c.counts[k as usize].into()))
        .collect();
    let reports: Vec<Value> = c
        .reports
        .iter()
        .map(|r| {
            let site = match r.site {
                Site::Access { write: true } => "write",
                Site::Access { write: false } => "read",
                other => other.name(),
            };
            json!({
                "kind": r.kind.name(),
                "at": site,
                "cpu": r.cpu,
                "time_s": secs(r.time),
                "mm": r.mm,
                "address": format!("{:#x}", r.vpn << 12),
                "pfn": format!("{:#x}", r.pfn),
                "history": r.history.iter().map(record_json).collect::<Vec<_>>(),
                "last_events": r.recent.iter().map(record_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "enabled": c.enabled,
        "violations": c.total(),
        "by_kind": counts,
        "by_site": {
            "access": c.sites[0],
            "free": c.sites[1],
            "pageout": c.sites[2],
        },
        "first": reports,
    })
}
