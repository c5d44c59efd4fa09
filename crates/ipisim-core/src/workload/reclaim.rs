//! `reclaim`: a microbenchmark of reclaim's TLB flushing. `processes` processes on CPUs 1..N each
//! map their own file (MAP_SHARED) and read (or write) `pages` pages of it (all at once, or with
//! `touch = in_turn` one after another), then spin in user space (`busy`) or sleep. Then a reclaimer on CPU 0 shrinks the LRU until it is empty. A clean
//! page is seen twice: the first scan finds its accessed bit and rotates it, the second reclaims.
//! A written page is seen three times by a `kswapd` reclaimer: rotated, unmapped but kept (it was
//! referenced, PAGEREF_RECLAIM_CLEAN), then written out and reclaimed. With `memory = anon` the
//! processes write private anonymous memory instead, swapped out: from 5.9 it starts inactive and is
//! scanned twice like a clean file page; before, it started active and was deactivated once.

use super::{Host, Scenario, ScenarioDecl};
use crate::config::{params, ConfigError, Kind, Resolved};
use crate::engine::{CpuId, TaskId, NEVER};
use crate::machine::Machine;
use crate::sched::{self, Outcome, Step};

const REMOTE: &[&str] = &["busy", "sleeping"];
const ACCESS: &[&str] = &["read", "write"];
const RECLAIMER: &[&str] = &["direct", "kswapd"];
const MEMORY: &[&str] = &["file", "anon"];
const TOUCH: &[&str] = &["together", "in_turn"];

params! {
    /// The reclaim parameters as declared, read once per run.
    #[derive(Debug, Clone)]
    pub struct Params;
    const PARAMS = {
        processes: usize = "processes", Kind::Int { min: 1, max: 1023 }, "processes", "1", "reader processes, on CPUs 1..N";
        pages: u64 = "pages", Kind::Int { min: 1, max: 1 << 24 }, "pages", "512", "pages each process maps and reads";
        remote: String = "remote", Kind::Choice(REMOTE), "", "busy", "after reading, the processes spin in user space or sleep";
        memory: String = "memory", Kind::Choice(MEMORY), "", "file", "each process maps its own file (MAP_SHARED), or private anonymous memory (swapped out)";
        access: String = "access", Kind::Choice(ACCESS), "", "read", "the processes read their pages (PROT_READ) or write them (PROT_WRITE: dirty)";
        reclaimer: String = "reclaimer", Kind::Choice(RECLAIMER), "", "direct", "the reclaimer counts as direct reclaim, or as node 0's kswapd (which alone writes dirty file pages)";
        touch: String = "touch", Kind::Choice(TOUCH), "", "together", "the processes touch their pages all at once, or one after another (each process's pages then lie together on the LRU)";
    }
}

pub const DECL: ScenarioDecl = ScenarioDecl {
    name: "reclaim",
    description:
        "microbenchmark: processes on CPUs 1..N read file pages, then CPU 0 reclaims them all",
    params: PARAMS,
    metrics: &[("tlb_shootdowns", true)],
    powerpc: false,
    arm64: true,
    riscv: true,
    thp: false,
    machine: None,
    check: &[],
};

pub struct Reclaim {
    processes: usize,
    pages: u64,
    busy: bool,
    write: bool,
    kswapd: bool,
    anon: bool,
    in_turn: bool,
    /// Per reader: (first page, pages read so far).
    readers: Vec<(u64, u64)>,
    done_reading: usize,
    reclaimer: TaskId,
}

impl Reclaim {
    pub fn new(r: &Resolved, m: &Machine) -> Result<Reclaim, ConfigError> {
        let p = Params::from_resolved(r)?;
        let processes = p.processes;
        super::need_cpus(
            r,
            m,
            "processes",
            format!("{processes} processes"),
            processes + 1,
        )?;
        let pages = p.pages;
        let (write, kswapd) = (p.access == "write", p.reclaimer == "kswapd");
        let anon = p.memory == "anon";
        if anon && !write {
            return Err(r.error(
                "access",
                "anonymous memory must be written (a read maps the shared zero page): set access=write",
            ));
        }
        if write && !kswapd && !anon {
            return Err(r.error(
                "access",
                "written file pages are reclaimed only by kswapd (shrink_page_list): set reclaimer=kswapd",
            ));
        }
        if processes as u64 * pages * 4096 > m.mem_per_node * m.nodes as u64 / 2 {
            return Err(r.error("pages", "more than half the machine's memory"));
        }
        Ok(Reclaim {
            processes,
            pages,
            busy: p.remote == "busy",
            write,
            kswapd,
            anon,
            in_turn: p.touch == "in_turn",
            readers: Vec::new(),
            done_reading: 0,
            reclaimer: 0,
        })
    }
}

impl Scenario for Reclaim {
    fn start(&mut self, s: &mut impl Host) {
        let (n, pages) = (self.processes, self.pages);
        for i in 0..n {
            let mm = super::mm_alloc(s);
            let start = if self.anon {
                s.mem().map_new_anon(mm, pages)
            } else {
                s.mem().map_new_file(mm, pages)
            };
            let t = sched::spawn(s, mm, 1 + i);
            debug_assert_eq!(t, i);
            s.sched().tasks[t].comm = "reader".into();
            self.readers.push((start, 0));
        }
        let mm = super::mm_alloc(s);
        let t = sched::spawn_at(s, mm, 0, NEVER);
        s.sched().tasks[t].comm = "reclaimer".into();
        if self.kswapd {
            // current_is_kswapd(): the reclaimer stands in for node 0's kswapd.
            s.sched().tasks[t].comm = "kswapd0".into();
            s.mem().kswapd[0] = Some(t);
        }
        self.reclaimer = t;
    }

    fn next_op(&mut self, s: &mut impl Host, _cpu: CpuId, t: TaskId) -> Outcome {
        let (pages, busy, reclaimer) = (self.pages, self.busy, self.reclaimer);
        if t == reclaimer {
            // Shrink whichever node still has pages, until none has.
            let node = (0..s.machine().nodes).find(|&n| !s.mem().lru[n].is_empty());
            return match node {
                Some(node) => {
                    s.push_step(
                        t,
                        Step::ShrinkNode {
                            node: node as u32,
                            nr: 32,
                            nr_active: 32,
                        },
                    );
                    Outcome::Next
                }
                None => {
                    s.finish();
                    Outcome::Exit
                }
            };
        }
        let (start, read) = self.readers[t];
        if self.in_turn && read == 0 && self.done_reading < t {
            // Not its turn: the previous process wakes it when it has read everything.
            return Outcome::Sleep(NEVER);
        }
        if read < pages {
            let n = s.mem().cfg.fault_around_pages.min(pages - read);
            self.readers[t].1 += n;
            s.push_step(
                t,
                Step::FileRead {
                    vpn: start + read,
                    n: n as u32,
                    write: self.write,
                },
            );
            return Outcome::Next;
        }
        if read > pages {
            return super::remote_op(busy);
        }
        // Read everything: put the pagevec's pages on the LRU (lru_add_drain) and tell the reclaimer.
        self.readers[t].1 += 1;
        let on = s.sched().tasks[t].cpu;
        let ps = crate::mm::lru::lru_add_drain(s, on, t);
        self.done_reading += 1;
        if self.done_reading == self.processes {
            sched::wake(s, reclaimer);
        } else if self.in_turn {
            sched::wake(s, t + 1);
        }
        Outcome::Busy {
            ps,
            irqs_off: false,
        }
    }

    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        let pages = self.processes as u64 * self.pages;
        let tlb: u64 = s.observed().stats.irqs[crate::observe::Irq::Tlb as usize]
            .iter()
            .sum();
        m.insert("pages".into(), pages.into());
        m.insert("tlb_shootdowns".into(), tlb.into());
        m.insert("ipis_sent".into(), s.observed().stats.ipis_sent.into());
        m
    }

    fn host_bytes(&self, m: &Machine) -> u64 {
        super::fills_memory(m)
    }
}
