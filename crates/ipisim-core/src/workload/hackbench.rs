//! `hackbench` (seed 004, "hackbench 400 on a 8 CPU x86 VM"): `groups` groups of 20 sender and
//! 20 receiver processes. Every sender writes `loops` 100-byte messages to each receiver of its
//! group; every receiver reads all of them. The parent (on CPU 0) forks every child in turn:
//! copy_process allocates the child's `footprint` pages (kernel stack, page tables, its first
//! user pages, socket buffers), freed when the child exits; the children wait until all are
//! ready, then the clock starts. As they run, the processes read pages of the program text from
//! the page cache (`text` pages shared by all, mapped executable: PG_EXEC), which reclaim keeps
//! active while they are referenced and otherwise evicts, and the next reader brings back. The
//! machine has no swap: only the text is reclaimable. With many groups the footprints exceed
//! memory: direct reclaim evicts the text, fails, drains the per-CPU lists and, when it reports
//! no progress, the OOM killer kills the process with the most points. The parent holds a
//! footprint as its children do and is first in the task list, so it can be chosen; to 5.1 the
//! OOM killer then sacrifices a child instead. If it dies, forking stops, the children it forked
//! wait forever on the wakeup pipe (each holds its write end), and the run ends, as the shell's
//! wait for hackbench does.
//!
//! A socket message is an skb from SLUB: its sk_buff from skbuff_head_cache and its data from
//! kmalloc-512, each taken from the writer's CPU's current slab of that cache (mm/slub.rs: on 8
//! CPUs, slabs of order 1 and 2, which come from the buddy lists, never from a pcp list). A
//! slab is freed when its last object is. A pipe
//! keeps appending 100-byte messages to its last page while it has room (pipe_write merging into
//! the last buffer) and frees a page once every message in it was read. Message memory is kernel
//! memory, not the writer's rss. A writer sleeps while the receiver's queue is full: 277 skbs for
//! a socket (sk_sndbuf = 212992 bytes), 16 pages for a pipe (PIPE_DEF_BUFFERS). Processes are
//! pinned round-robin to the CPUs (task id modulo CPUs).

use std::collections::VecDeque;

use super::{Host, Scenario, ScenarioDecl};
use crate::config::{params, ConfigError, Kind, Resolved};
use crate::engine::{secs, CpuId, TaskId, Time, NEVER};
use crate::machine::{Cost, Machine};
use crate::mm::filemap::{PageInfo, PG_EXEC, PG_REFERENCED};
use crate::mm::page_alloc::{
    alloc_block, alloc_page, alloc_slowpath, alloc_succeeded, free_block, free_page, NeedReclaim,
};
use crate::mm::slub::SlabCache;
use crate::mm::NONE;
use crate::observe::{latency_json, Func, Irq, Vm};
use crate::sched::{self, Outcome};

const IPC: &[&str] = &["sockets", "pipes"];

/// hackbench's num_fds: senders and receivers per group.
const FDS: usize = 20;
/// hackbench's default datasize, and how many such messages one pipe page holds.
const MSG_BYTES: usize = 100;
const PIPE_MSGS_PER_PAGE: u16 = (4096 / MSG_BYTES) as u16;
/// Slab objects of one socket message: its sk_buff (skbuff_head_cache, 256-byte objects) and
/// its data, 100 bytes plus skb_shared_info (kmalloc-512).
const SKB_HEAD_BYTES: usize = 256;
const SKB_DATA_BYTES: usize = 512;
/// sk_sndbuf (sysctl_wmem_default, 212992 bytes) in skbs of that truesize.
const SOCKET_QUEUE_MSGS: usize = 212992 / (SKB_HEAD_BYTES + SKB_DATA_BYTES);
/// PIPE_DEF_BUFFERS.
const PIPE_QUEUE_PAGES: usize = 16;

params! {
    /// The hackbench parameters as declared, read once per run.
    #[derive(Debug, Clone)]
    pub struct Params;
    const PARAMS = {
        groups: usize = "groups", Kind::Int { min: 1, max: 4000 }, "groups", "10", "groups of 20 senders + 20 receivers (hackbench's first argument)";
        loops: usize = "loops", Kind::Int { min: 1, max: 100000 }, "messages", "100", "messages each sender writes to each receiver of its group (hackbench -l)";
        ipc: String = "ipc", Kind::Choice(IPC), "", "sockets", "unix socket pairs (an skb per message: a 256-byte sk_buff and a kmalloc-512 for its data, from SLUB slabs of the order calculate_order() gives for the CPU count) or pipes (-pipe: 40 messages per page)";
        footprint: usize = "footprint", Kind::Int { min: 0, max: 65536 }, "pages", "24", "pages fork allocates for each process and its exit frees (kernel stack, page tables, first user pages, socket buffers)";
        text: usize = "text", Kind::Int { min: 0, max: 1 << 20 }, "pages", "512", "page-cache pages of the program and libraries every process reads as it runs (reclaim evicts them, the next reader reads them back)";
    }
}

pub const DECL: ScenarioDecl = ScenarioDecl {
    name: "hackbench",
    description: "groups of 20 senders and 20 receivers exchange messages through sockets or pipes; each process holds kernel memory, so many groups run the machine out of memory",
    params: PARAMS,
    metrics: &[("hackbench_s", true)],
    powerpc: false,
    arm64: false,
    riscv: false,
    thp: false,
    machine: None,
    check: &[],
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not forked yet: the parent is allocating its footprint (copy_process).
    Start,
    /// Forked: its first run.
    Forked,
    /// Waiting for every process to be ready (hackbench's ready/wakeup pipes).
    Ready,
    Run,
    /// Its memory is freed; it exits at the next step.
    Exiting,
}

/// One entry of a receiver's queue: a pipe page and the messages written to and read from it,
/// or one socket message (its sk_buff in slab `pfn`, its data in slab `data`).
#[derive(Debug, Clone, Copy)]
struct Buf {
    pfn: u32,
    data: u32,
    written: u16,
    read: u16,
}

pub struct Hackbench {
    groups: usize,
    loops: usize,
    pipes: bool,
    footprint: usize,
    text_pages: usize,
    text_file: u32,
    ntasks: usize,
    phase: Vec<Phase>,
    /// skbuff_head_cache and kmalloc-512 (made in start(), when the frames are known).
    skb_head: Option<SlabCache>,
    skb_data: Option<SlabCache>,
    /// The pages of a slab being allocated or freed (kept to spare an allocation each time).
    slab_pages: Vec<u32>,
    /// Footprint pages: task t's are own[t * footprint .. + owned[t]] (the parent's too, as
    /// task `ntasks`).
    own: Vec<u32>,
    owned: Vec<u32>,
    /// Per task: operations done (picks the text page it reads next).
    ops: Vec<u32>,
    /// Per sender: messages written (message k goes to receiver k % 20 of its group).
    sent: Vec<u32>,
    /// Per receiver (group * 20 + index): its queue, messages still to read, writers sleeping
    /// on it, and whether it is gone (its socket closed).
    queue: Vec<VecDeque<Buf>>,
    expected: Vec<u32>,
    blocked: Vec<Vec<u32>>,
    closed: Vec<bool>,
    ready: usize,
    alive: usize,
    /// Children the parent (task `ntasks`) has forked.
    forked: usize,
    go: Option<Time>,
    messages: u64,
    /// The most pages in use at once (pcp lists included).
    peak_used: u64,
    /// pcp_global_drain and pcp_global_ipi_saved when the clock started (the fork phase's).
    drains_at_go: (u64, u64),
    /// OOM kills when the clock started (the fork phase's).
    kills_at_go: u64,
}

impl Hackbench {
    pub fn new(r: &Resolved, m: &Machine) -> Result<Hackbench, ConfigError> {
        let p = Params::from_resolved(r)?;
        let groups = p.groups;
        let loops = p.loops;
        let footprint = p.footprint;
        let ntasks = groups * 2 * FDS;
        // Far past OOM nothing more is learnt, and the bookkeeping would not fit in memory.
        let pages = (m.mem_per_node * m.nodes as u64) >> 12;
        if (ntasks as u64) * (footprint as u64) > 4 * pages {
            let msg = format!(
                "{groups} groups x 40 processes x {footprint} pages is more than 4 x the machine's {pages} pages"
            );
            return Err(r.error("footprint", msg));
        }
        let receivers = groups * FDS;
        Ok(Hackbench {
            groups,
            loops,
            pipes: p.ipc == "pipes",
            footprint,
            text_pages: p.text,
            text_file: 0,
            ntasks,
            phase: vec![Phase::Start; ntasks],
            own: vec![NONE; (ntasks + 1) * footprint],
            owned: vec![0; ntasks + 1],
            ops: vec![0; ntasks + 1],
            sent: vec![0; ntasks],
            queue: (0..receivers).map(|_| VecDeque::new()).collect(),
            expected: vec![(loops * FDS) as u32; receivers],
            blocked: vec![Vec::new(); receivers],
            closed: vec![false; receivers],
            ready: 0,
            alive: ntasks,
            forked: 0,
            go: None,
            messages: 0,
            peak_used: 0,
            skb_head: None,
            skb_data: None,
            slab_pages: Vec::new(),
            drains_at_go: (0, 0),
            kills_at_go: 0,
        })
    }

    /// The parent: its own footprint first, then fork each child (copy_process allocates its
    /// footprint, charged to the child once it exists), then wait for all of them.
    fn parent(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
        if self.forked == self.ntasks {
            self.release_if_ready(s);
            return sched::sleep_interruptible(s, t);
        }
        let c = if (self.owned[t] as usize) < self.footprint {
            t
        } else {
            self.forked
        };
        if (self.owned[c] as usize) < self.footprint {
            if let Some(o) = self.read_text(s, cpu, t) {
                return o;
            }
            let Some((pfn, ps)) = get_page(s, cpu, t) else {
                return Outcome::Next;
            };
            self.own[c * self.footprint + self.owned[c] as usize] = pfn;
            self.owned[c] += 1;
            if c == t {
                s.mem().tasks[t].rss = self.owned[t] as u64;
            }
            self.ops[t] += 1;
            return Outcome::Busy {
                ps,
                irqs_off: false,
            };
        }
        // fork() returns: the child exists (and holds its pages) and runs.
        self.phase[c] = Phase::Forked;
        self.forked += 1;
        s.mem().tasks[c].rss = self.owned[c] as u64;
        s.mem().tasks[c].real_parent = Some(t);
        s.mem().tasklist.push(c);
        sched::wake(s, c);
        let ps = s.machine().cost[Cost::ThreadCreate];
        s.obs().stats.charge(Some(t), Func::Syscall, ps);
        Outcome::Busy {
            ps,
            irqs_off: false,
        }
    }

    /// Everyone alive is ready: the parent writes the wakeup pipe and the clock starts.
    fn release_if_ready(&mut self, s: &mut impl Host) -> bool {
        let now = s.now();
        if self.go.is_some() || self.forked < self.ntasks || self.ready < self.alive {
            return self.go.is_some();
        }
        self.go = Some(now);
        self.drains_at_go = (
            s.obs().stats.vm[Vm::PcpGlobalDrain as usize],
            s.obs().stats.vm[Vm::PcpGlobalIpiSaved as usize],
        );
        self.kills_at_go = s.obs().stats.oom_kills;
        for t in 0..self.ntasks {
            if self.phase[t] == Phase::Ready {
                self.phase[t] = Phase::Run;
                sched::wake_interruptible(s, t);
            }
        }
        true
    }

    /// The text page this operation runs through: read back into the page cache if reclaim
    /// evicted it (a clear and an insert, as readahead of a cached file does here), else
    /// mark_page_accessed. Returns the outcome when the task must first do that (or reclaim).
    fn read_text(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Option<Outcome> {
        if self.text_pages == 0 {
            return None;
        }
        let (file, index) = (self.text_file, self.ops[t] as usize % self.text_pages);
        let pfn = s.mem().files[file as usize].pages[index];
        if pfn != NONE {
            s.mem().page[pfn as usize].flags |= PG_REFERENCED;
            return None;
        }
        let Some((pfn, alloc)) = get_page(s, cpu, t) else {
            return Some(Outcome::Next);
        };
        s.mem().files[file as usize].pages[index] = pfn;
        s.mem().page[pfn as usize] = PageInfo {
            file,
            index: index as u32,
            flags: PG_EXEC | PG_REFERENCED,
            cpu: cpu as u16,
        };
        let read = s.machine().cost[Cost::FaultFile] + s.machine().cost[Cost::PageClear];
        let read = read + s.machine().cost[Cost::PagecacheInsert];
        s.obs().stats.charge(Some(t), Func::FilemapFault, read);
        let ps = alloc + read + crate::mm::lru::lru_cache_add(s, cpu, t, pfn);
        Some(Outcome::Busy {
            ps,
            irqs_off: false,
        })
    }

    /// The receiver's queue is full (the writer waits in sock_alloc_send_pskb / pipe_wait).
    fn queue_full(&self, rid: usize) -> bool {
        let q = &self.queue[rid];
        if self.pipes {
            q.len() >= PIPE_QUEUE_PAGES && q.back().is_some_and(|b| b.written == PIPE_MSGS_PER_PAGE)
        } else {
            q.len() >= SOCKET_QUEUE_MSGS
        }
    }

    /// One write(): the next message to receiver k % 20 of the group.
    fn sender(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
        let syscall = s.machine().cost[Cost::Syscall];
        let total = (self.loops * FDS) as u32;
        if self.sent[t] >= total {
            return self.do_exit(s, cpu, t);
        }
        let k = self.sent[t] as usize;
        let rid = t / (2 * FDS) * FDS + k % FDS;
        if self.closed[rid] {
            // EPIPE: the receiver was killed; hackbench's writer goes on to the next one here.
            self.sent[t] += 1;
            return Outcome::Next;
        }
        if self.queue_full(rid) {
            self.blocked[rid].push(t as u32);
            return sched::sleep_interruptible(s, t);
        }
        let merge = self.pipes
            && self.queue[rid]
                .back()
                .is_some_and(|b| b.written < PIPE_MSGS_PER_PAGE);
        let mut ps = syscall;
        if merge {
            self.queue[rid].back_mut().expect("checked").written += 1;
        } else {
            // A new pipe page, or an skb.
            let got = if self.pipes {
                get_page(s, cpu, t).map(|(pfn, alloc)| (pfn, NONE, alloc))
            } else {
                self.alloc_skb(s, cpu, t)
            };
            let Some((pfn, data, alloc)) = got else {
                return Outcome::Next;
            };
            ps += alloc;
            self.queue[rid].push_back(Buf {
                pfn,
                data,
                written: 1,
                read: 0,
            });
        }
        s.obs().stats.charge(Some(t), Func::Syscall, syscall);
        self.sent[t] += 1;
        self.ops[t] += 1;
        sched::wake_interruptible(s, receiver_task(rid));
        Outcome::Busy {
            ps,
            irqs_off: false,
        }
    }

    /// One read(): the oldest message of the queue; a page whose messages are all read is freed.
    fn receiver(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
        let rid = rid_of(t);
        let syscall = s.machine().cost[Cost::Syscall];
        if self.expected[rid] == 0 {
            return self.do_exit(s, cpu, t);
        }
        let Some(front) = self.queue[rid].front_mut() else {
            return sched::sleep_interruptible(s, t);
        };
        front.read += 1;
        let b = *front;
        self.expected[rid] -= 1;
        self.messages += 1;
        self.ops[t] += 1;
        let mut ps = syscall;
        if b.read == b.written {
            self.queue[rid].pop_front();
        }
        s.obs().stats.charge(Some(t), Func::Syscall, syscall);
        if b.read == b.written {
            let free = self.free_buf(s, cpu, b);
            s.obs().stats.charge(Some(t), Func::FreePage, free);
            ps += free;
        }
        self.wake_writers(s, rid);
        Outcome::Busy {
            ps,
            irqs_off: false,
        }
    }

    fn cache(&mut self, c: SkbCache) -> &mut SlabCache {
        match c {
            SkbCache::Head => self.skb_head.as_mut(),
            SkbCache::Data => self.skb_data.as_mut(),
        }
        .expect("made in start()")
    }

    /// alloc_skb(): an sk_buff and its data, each from this CPU's current slab of its cache,
    /// after a new slab (new_slab -> alloc_pages of the cache's order) where that one is full.
    /// Returns the two slabs and the time taken, or None if an allocation entered the slowpath
    /// (a slab already got stays the CPU's, for the retry).
    fn alloc_skb(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Option<(u32, u32, Time)> {
        let mut ps = 0;
        for c in [SkbCache::Head, SkbCache::Data] {
            if !self.cache(c).needs_slab(cpu) {
                continue;
            }
            let order = self.cache(c).order;
            let mut pages = std::mem::take(&mut self.slab_pages);
            pages.clear();
            let got = alloc_block(s, cpu, t, order, &mut pages);
            let old = after_alloc(s, t, got).map(|alloc| {
                ps += alloc;
                self.cache(c).install(cpu, &pages)
            });
            self.slab_pages = pages;
            match old {
                None => return None,
                Some(Some(empty)) => ps += self.discard_slab(s, cpu, c, empty),
                Some(None) => {}
            }
        }
        let head = self.cache(SkbCache::Head).alloc(cpu);
        let data = self.cache(SkbCache::Data).alloc(cpu);
        Some((head, data, ps))
    }

    /// discard_slab(): an empty slab's pages back to the page allocator.
    fn discard_slab(&mut self, s: &mut impl Host, cpu: CpuId, c: SkbCache, slab: u32) -> Time {
        let mut pages = std::mem::take(&mut self.slab_pages);
        pages.clear();
        self.cache(c).pages(slab, &mut pages);
        let ps = free_block(s, cpu, &pages);
        self.slab_pages = pages;
        ps
    }

    /// A pipe page whose messages were all read is freed; an skb's two objects go back to their
    /// slabs, and a slab is freed once its last object is (SLUB's discard_slab; empty slabs kept
    /// on the partial list are not modelled).
    fn free_buf(&mut self, s: &mut impl Host, cpu: CpuId, b: Buf) -> Time {
        if self.pipes {
            return free_page(s, cpu, b.pfn);
        }
        let mut ps = 0;
        for (c, slab) in [(SkbCache::Head, b.pfn), (SkbCache::Data, b.data)] {
            if self.cache(c).free(slab) {
                ps += self.discard_slab(s, cpu, c, slab);
            }
        }
        ps
    }

    fn wake_writers(&mut self, s: &mut impl Host, rid: usize) {
        if self.queue_full(rid) {
            return;
        }
        let mut writers = std::mem::take(&mut self.blocked[rid]);
        for &w in &writers {
            sched::wake_interruptible(s, w as usize);
        }
        writers.clear();
        self.blocked[rid] = writers;
    }

    /// exit_mm(), the stack...: task `t`'s footprint back to the page allocator.
    fn free_footprint(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Time {
        let from = t * self.footprint;
        let n = self.owned[t] as usize;
        self.owned[t] = 0;
        s.mem().tasks[t].rss = 0;
        (from..from + n)
            .map(|i| free_page(s, cpu, self.own[i]))
            .sum()
    }

    /// The OOM killer took the parent: it frees its footprint and exits. Before the wakeup its
    /// children wait forever (hackbench's wakeup pipe has writers left: themselves), so the run
    /// ends here, as the shell's wait for it does; after, they run on to the end.
    fn parent_exit(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
        let ps = self.free_footprint(s, cpu, t);
        s.obs().stats.charge(Some(t), Func::FreePage, ps);
        if self.go.is_none() {
            s.finish();
        }
        Outcome::Exit
    }

    /// do_exit(): free the footprint (exit_mm, the stack...), close the task's sockets, and
    /// leave. A dead receiver's queued pages are freed; a dead sender's unsent messages are no
    /// longer expected by its receivers (EOF).
    fn do_exit(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
        let before_go = self.go.is_none();
        if before_go && self.phase[t] == Phase::Ready {
            self.ready -= 1;
        }
        self.phase[t] = Phase::Exiting;
        self.alive -= 1;
        let mut ps = self.free_footprint(s, cpu, t);
        if is_sender(t) {
            let total = (self.loops * FDS) as u32;
            let base = t / (2 * FDS) * FDS;
            for k in self.sent[t]..total {
                let rid = base + k as usize % FDS;
                if !self.closed[rid] {
                    self.expected[rid] -= 1;
                }
            }
            for j in 0..FDS {
                if self.expected[base + j] == 0 {
                    sched::wake_interruptible(s, receiver_task(base + j));
                }
            }
        } else {
            let rid = rid_of(t);
            self.closed[rid] = true;
            self.expected[rid] = 0;
            while let Some(b) = self.queue[rid].pop_front() {
                ps += self.free_buf(s, cpu, b);
            }
            // Writers waiting on it get EPIPE.
            let writers = std::mem::take(&mut self.blocked[rid]);
            for &w in &writers {
                sched::wake_interruptible(s, w as usize);
            }
        }
        s.obs().stats.charge(Some(t), Func::FreePage, ps);
        if before_go {
            self.release_if_ready(s);
        }
        Outcome::Busy {
            ps,
            irqs_off: false,
        }
    }
}

impl Scenario for Hackbench {
    fn start(&mut self, s: &mut impl Host) {
        // Frames carry `struct page` state: text pages go through the page cache and LRU.
        s.mem().page = vec![PageInfo::default(); s.mem().frames.total() as usize];
        let (frames, ncpus) = (s.mem().frames.total() as usize, s.machine().ncpus());
        self.skb_head = Some(SlabCache::new(SKB_HEAD_BYTES, ncpus, frames));
        self.skb_data = Some(SlabCache::new(SKB_DATA_BYTES, ncpus, frames));
        self.text_file = s.mem().new_file(self.text_pages as u64, None);
        for i in 0..self.ntasks {
            // Each hackbench process is a fork: its own mm. It runs once the parent forked it.
            let mm = super::mm_alloc(s);
            let t = sched::spawn_at(s, mm, i % ncpus, NEVER);
            debug_assert_eq!(t, i);
            s.sched().tasks[t].se = sched::fair::Entity::forked();
            s.sched().tasks[t].comm = if is_sender(t) { "sender" } else { "receiver" }.into();
        }
        // The hackbench parent forks every child in turn, then waits for them to be ready.
        let mm = super::mm_alloc(s);
        let parent = sched::spawn(s, mm, 0);
        debug_assert_eq!(parent, self.ntasks);
        s.sched().tasks[parent].comm = "hackbench".into();
        s.mem().tasklist.push(parent);
        super::spawn_kswapds(s);
    }

    fn next_op(&mut self, s: &mut impl Host, cpu: CpuId, t: TaskId) -> Outcome {
        self.peak_used = self.peak_used.max(s.mem().frames.used);
        if t == self.ntasks {
            if s.mem().oom_killed[t] {
                return self.parent_exit(s, cpu, t);
            }
            return self.parent(s, cpu, t);
        }
        if self.phase[t] == Phase::Exiting {
            return Outcome::Exit;
        }
        // SIGKILL from the OOM killer (TIF_MEMDIE): the task dies at its next user step.
        if s.mem().oom_killed[t] {
            return self.do_exit(s, cpu, t);
        }
        match self.phase[t] {
            // A child that is not forked yet does not run.
            Phase::Start => sched::sleep_interruptible(s, t),
            Phase::Forked => {
                // The child's first run (its text), then ready(): tell the parent, wait for go.
                if let Some(o) = self.read_text(s, cpu, t) {
                    return o;
                }
                self.ops[t] += 1;
                self.phase[t] = Phase::Ready;
                self.ready += 1;
                if !self.release_if_ready(s) {
                    return sched::sleep_interruptible(s, t);
                }
                Outcome::Next
            }
            Phase::Ready => sched::sleep_interruptible(s, t),
            Phase::Run => {
                if let Some(o) = self.read_text(s, cpu, t) {
                    return o;
                }
                if is_sender(t) {
                    self.sender(s, cpu, t)
                } else {
                    self.receiver(s, cpu, t)
                }
            }
            Phase::Exiting => Outcome::Exit,
        }
    }

    /// The run ends when the last process has exited.
    fn task_exited(&mut self, s: &mut impl Host, _t: TaskId) {
        if self.alive == 0 {
            s.finish();
        }
    }

    fn ops(&self, s: &impl Host) -> serde_json::Map<String, serde_json::Value> {
        let end = s.end().unwrap_or(s.now());
        let go = self.go.unwrap_or(end);
        let mut m = serde_json::Map::new();
        m.insert("hackbench_s".into(), secs(end.saturating_sub(go)).into());
        m.insert("startup_s".into(), secs(go).into());
        m.insert("messages".into(), self.messages.into());
        m.insert(
            "messages_expected".into(),
            (self.groups * FDS * FDS * self.loops).into(),
        );
        let kills = s.observed().stats.oom_kills;
        let drains = s.observed().stats.vm[Vm::PcpGlobalDrain as usize];
        let saved = s.observed().stats.vm[Vm::PcpGlobalIpiSaved as usize];
        // A run that never started its clock was all fork phase.
        let (fork_drains, fork_saved, fork_kills) = match self.go {
            Some(_) => (self.drains_at_go.0, self.drains_at_go.1, self.kills_at_go),
            None => (drains, saved, kills),
        };
        m.insert("forked".into(), self.forked.into());
        let parent_killed = s.mm_view().0.oom_killed[self.ntasks];
        m.insert("parent_oom_killed".into(), u64::from(parent_killed).into());
        m.insert("oom_kills".into(), kills.into());
        m.insert("oom_kills_fork".into(), fork_kills.into());
        m.insert("peak_used_pages".into(), self.peak_used.into());
        m.insert("pcp_global_drain".into(), drains.into());
        m.insert("pcp_global_ipi_saved".into(), saved.into());
        let ratio = if drains == 0 {
            0.0
        } else {
            saved as f64 / drains as f64
        };
        m.insert("ipi_saved_ratio".into(), ratio.into());
        m.insert("pcp_global_drain_fork".into(), fork_drains.into());
        m.insert("pcp_global_ipi_saved_fork".into(), fork_saved.into());
        let cal: u64 = s.observed().stats.irqs[Irq::Cal as usize].iter().sum();
        m.insert("cal_interrupts".into(), cal.into());
        let lat = latency_json(&s.observed().stats.direct_reclaim_latency);
        let drained = latency_json(&s.observed().stats.direct_reclaim_drained_latency);
        for key in ["count", "mean_us", "p50_us", "p90_us", "p99_us", "max_us"] {
            m.insert(format!("direct_reclaim_{key}"), lat[key].clone());
            m.insert(format!("drained_reclaim_{key}"), drained[key].clone());
        }
        m
    }

    fn host_bytes(&self, m: &Machine) -> u64 {
        super::fills_memory(m)
    }
}

fn is_sender(t: TaskId) -> bool {
    t % (2 * FDS) < FDS
}

/// The receiver index (group * 20 + j) of receiver task `t`.
fn rid_of(t: TaskId) -> usize {
    t / (2 * FDS) * FDS + (t % (2 * FDS) - FDS)
}

fn receiver_task(rid: usize) -> TaskId {
    rid / FDS * 2 * FDS + FDS + rid % FDS
}

/// A page for task `t` (its footprint, a message, a text page), or the slowpath was entered and
/// the caller must return `Outcome::Next` to run it and then retry this operation.
fn get_page(s: &mut impl Host, cpu: CpuId, t: TaskId) -> Option<(u32, Time)> {
    let got = alloc_page(s, cpu, t);
    after_alloc(s, t, got)
}

/// What an allocation attempt of task `t` got, or None once its slowpath was entered.
fn after_alloc<T>(s: &mut impl Host, t: TaskId, got: Result<T, NeedReclaim>) -> Option<T> {
    match got {
        Ok(got) => {
            alloc_succeeded(s, t);
            Some(got)
        }
        Err(NeedReclaim) => {
            alloc_slowpath(s, t);
            None
        }
    }
}

/// Which of the two skb caches.
#[derive(Clone, Copy)]
enum SkbCache {
    Head,
    Data,
}
