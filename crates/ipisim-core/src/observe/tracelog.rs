//! What `--trace` records inside its window: per-CPU slices (steps, interrupt handlers, spins),
//! one flow per IPI from sender to handler, and the `tlb:tlb_flush` / `ipi:*` tracepoints. It
//! writes Chrome trace-event JSON (loads in Perfetto) and ftrace text in the kernel's formats.

use crate::engine::TaskId;
use crate::engine::{CpuId, CpuMask, Time, PS_PER_S, PS_PER_US};
use serde_json::{json, Value};

/// Stop recording after this many records, so a long window cannot exhaust memory.
const MAX_RECORDS: usize = 2_000_000;

struct Slice {
    cpu: u16,
    start: Time,
    end: Time,
    name: &'static str,
}

struct Flow {
    id: u32,
    cpu: u16,
    time: Time,
    /// The handler end ("f") rather than the send ("s").
    end: bool,
}

enum Event {
    TlbFlush {
        reason: u8,
        pages: i64,
    },
    IpiSendCpu {
        target: usize,
        callsite: &'static str,
    },
    IpiSendCpumask {
        targets: CpuMask,
        callsite: &'static str,
    },
}

struct Line {
    time: Time,
    cpu: u16,
    task: Option<usize>,
    in_irq: bool,
    event: Event,
}

pub struct TraceLog {
    from: Time,
    to: Time,
    pub truncated: bool,
    slices: Vec<Slice>,
    flows: Vec<Flow>,
    lines: Vec<Line>,
    /// Per CPU: the step slice still running (name, start).
    open: Vec<Option<(&'static str, Time)>>,
    /// Per CPU: flows of IPIs that arrived and wait for the handler.
    pending: Vec<Vec<u32>>,
    next_flow: u32,
}

impl TraceLog {
    pub fn new(ncpus: usize, from: Time, to: Time) -> TraceLog {
        TraceLog {
            from,
            to,
            truncated: false,
            slices: Vec::new(),
            flows: Vec::new(),
            lines: Vec::new(),
            open: vec![None; ncpus],
            pending: vec![Vec::new(); ncpus],
            next_flow: 1,
        }
    }

    fn room(&mut self) -> bool {
        if self.slices.len() + self.flows.len() + self.lines.len() >= MAX_RECORDS {
            self.truncated = true;
        }
        !self.truncated
    }

    fn inside(&self, t: Time) -> bool {
        t >= self.from && t < self.to
    }

    /// A slice on `cpu`, clipped to the window.
    pub fn slice(&mut self, cpu: CpuId, start: Time, end: Time, name: &'static str) {
        if end <= self.from || start >= self.to || end <= start || !self.room() {
            return;
        }
        let (start, end) = (start.max(self.from), end.min(self.to));
        self.slices.push(Slice {
            cpu: cpu as u16,
            start,
            end,
            name,
        });
    }

    pub fn step_begin(&mut self, cpu: CpuId, name: &'static str, now: Time) {
        self.open[cpu] = Some((name, now));
    }

    pub fn step_end(&mut self, cpu: CpuId, now: Time) {
        if let Some((name, start)) = self.open[cpu].take() {
            self.slice(cpu, start, now, name);
        }
    }

    /// An IPI leaves `cpu` at `at`; returns its flow id (0: not recorded).
    pub fn ipi_sent(&mut self, cpu: CpuId, at: Time) -> u32 {
        if !self.inside(at) || !self.room() {
            return 0;
        }
        let id = self.next_flow;
        self.next_flow += 1;
        self.flows.push(Flow {
            id,
            cpu: cpu as u16,
            time: at,
            end: false,
        });
        id
    }

    pub fn ipi_arrived(&mut self, cpu: CpuId, flow: u32) {
        if flow != 0 {
            self.pending[cpu].push(flow);
        }
    }

    /// The handler starts on `cpu`: it ends every flow that arrived for it.
    pub fn handler_start(&mut self, cpu: CpuId, now: Time) {
        for id in std::mem::take(&mut self.pending[cpu]) {
            self.flows.push(Flow {
                id,
                cpu: cpu as u16,
                time: now,
                end: true,
            });
        }
    }

    fn line(&mut self, s: LineAt, event: Event) {
        if self.inside(s.time) && self.room() {
            self.lines.push(Line {
                time: s.time,
                cpu: s.cpu as u16,
                task: s.task,
                in_irq: s.in_irq,
                event,
            });
        }
    }

    /// Chrome trace-event JSON: one pseudo-thread per CPU, v1 flows for IPIs, and a counter of
    /// interrupts per second in IRQ_BIN steps.
    pub fn chrome_json(&self, ncpus: usize, irq_bins: &[u32]) -> String {
        // Whole nanoseconds, so a nested slice never ends past its parent after rounding.
        let us = |t: Time| (t / 1000) as f64 / 1000.0;
        let tid = |cpu: u16| 1000 + cpu as u64;
        let mut ev: Vec<Value> =
            vec![json!({"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "CPUs"}})];
        for cpu in 0..ncpus as u16 {
            ev.push(json!({"ph": "M", "pid": 1, "tid": tid(cpu), "name": "thread_name", "args": {"name": format!("CPU {cpu}")}}));
        }
        for sl in &self.slices {
            ev.push(json!({"ph": "X", "pid": 1, "tid": tid(sl.cpu), "ts": us(sl.start), "dur": us(sl.end) - us(sl.start), "name": sl.name, "cat": "ipisim"}));
        }
        for f in &self.flows {
            let mut e = json!({"ph": if f.end { "f" } else { "s" }, "id": f.id, "pid": 1, "tid": tid(f.cpu), "ts": us(f.time), "name": "IPI", "cat": "ipi"});
            if f.end {
                e["bp"] = "e".into();
            }
            ev.push(e);
        }
        let bin = super::IRQ_BIN;
        for (i, &n) in irq_bins.iter().enumerate() {
            let t = i as Time * bin;
            if t + bin > self.from && t < self.to {
                let rate = n as f64 * PS_PER_S as f64 / bin as f64;
                ev.push(json!({"ph": "C", "pid": 1, "ts": us(t.max(self.from)), "name": "interrupts", "args": {"per_s": rate}}));
            }
        }
        json!({"traceEvents": ev, "displayTimeUnit": "ns"}).to_string()
    }

    /// ftrace text: the tracefs line prefix, then each event's TP_printk body.
    pub fn ftrace_text<'a>(&self, comm: impl Fn(TaskId) -> &'a str) -> String {
        let mut out = String::from("# tracer: nop\n#\n#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n#              | |         |   |||||     |         |\n");
        for l in &self.lines {
            let (comm, pid) = match l.task {
                Some(t) => (comm(t), 1000 + t),
                None => ("<idle>", 0),
            };
            let flags = if l.in_irq { "d.h1." } else { "...1." };
            let (sec, usec) = (l.time / PS_PER_S, (l.time % PS_PER_S) / PS_PER_US);
            let body = match &l.event {
                Event::TlbFlush { reason, pages } => {
                    format!("tlb_flush: pages:{pages} reason:{} ({reason})", REASONS[*reason as usize])
                }
                // Both are traced in send_call_function(_single)_ipi(_mask), inlined into
                // smp_call_function_many_cond: the callsite is its caller; since 6.3 (when the
                // tracepoints came) both IPIs run generic_smp_call_function_single_interrupt.
                Event::IpiSendCpu { target, callsite } => {
                    format!("ipi_send_cpu: cpu={target} callsite={callsite} callback=generic_smp_call_function_single_interrupt")
                }
                Event::IpiSendCpumask { targets, callsite } => format!(
                    "ipi_send_cpumask: cpumask={} callsite={callsite} callback=generic_smp_call_function_single_interrupt",
                    cpulist(targets)
                ),
            };
            out += &format!(
                "{comm:>16}-{pid:<7} [{:03}] {flags} {sec:5}.{usec:06}: {body}\n",
                l.cpu
            );
        }
        out
    }
}

/// include/trace/events/tlb.h TLB_FLUSH_REASON (with TLB_REMOTE_WRONG_CPU, Dec 2025).
const REASONS: [&str; 6] = [
    "flush on task switch",
    "remote shootdown",
    "local shootdown",
    "local MM shootdown",
    "remote IPI send",
    "remote wrong CPU",
];

/// A cpumask as libtraceevent prints it: `0-3,8`.
fn cpulist(m: &CpuMask) -> String {
    let cpus: Vec<usize> = m.iter().collect();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Where and when a tracepoint fires: what ftrace's line prefix shows of the CPU.
pub struct LineAt {
    pub time: Time,
    pub cpu: CpuId,
    pub task: Option<TaskId>,
    pub in_irq: bool,
}

impl super::Observe {
    /// A trace is being recorded: a tracepoint's context (`LineAt`) is worth finding.
    pub fn tracing(&self) -> bool {
        self.trace.is_some()
    }

    /// Record `event` at `at` when tracing (the event is made only then: a cpumask is 128 bytes).
    fn record(&mut self, at: Option<LineAt>, event: impl FnOnce() -> Event) {
        if let (Some(tr), Some(at)) = (self.trace.as_mut(), at) {
            tr.line(at, event());
        }
    }

    /// The `tlb:tlb_flush` tracepoint: counted always, recorded when tracing (`at` then given).
    pub fn tlb_flush(&mut self, at: Option<LineAt>, reason: u8, pages: i64) {
        self.stats.trace(super::Trace::tlb_flush(reason));
        self.record(at, || Event::TlbFlush { reason, pages });
    }

    /// `ipi:ipi_send_cpu` from `callsite`.
    pub fn ipi_send_cpu(&mut self, at: Option<LineAt>, target: CpuId, callsite: &'static str) {
        self.stats.trace(super::Trace::IpiSendCpu);
        self.record(at, || Event::IpiSendCpu { target, callsite });
    }

    /// `ipi:ipi_send_cpumask` from `callsite`.
    pub fn ipi_send_cpumask(
        &mut self,
        at: Option<LineAt>,
        targets: &CpuMask,
        callsite: &'static str,
    ) {
        self.stats.trace(super::Trace::IpiSendCpumask);
        self.record(at, || Event::IpiSendCpumask {
            targets: *targets,
            callsite,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_collapse_runs() {
        let mut m = CpuMask::new();
        for c in [0, 1, 2, 3, 8, 10, 11] {
            m.set(c);
        }
        assert_eq!(cpulist(&m), "0-3,8,10-11");
    }
}
