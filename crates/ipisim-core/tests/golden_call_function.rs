//! smp_call_function_many before and after 3.9: the 3.8 global queue (`global_cfd`) and the
//! per-CPU queues (`percpu_csd`), with and without the 4.13 skip of CPUs whose queue is busy.

mod common;

use common::{profile_percent, run_json, tlb};
use ipisim_core::engine::PS_PER_US as US;
use ipisim_core::machine::Machine;
use ipisim_core::smp::Vector;
use ipisim_core::RunRequest;
use serde_json::Value;

fn result(scenario: &str, kernel: &str, sets: &[(&str, &str)]) -> Value {
    run_json(scenario, "xeon-4n-48c-64g", kernel, sets)
}

/// The same run on the 4-socket Xeon before it starts, to drive by hand.
fn sim(scenario: &str, kernel: &str, sets: &[(&str, &str)]) -> ipisim_core::sim::Sim {
    let req = common::request(scenario, "xeon-4n-48c-64g", kernel, sets);
    ipisim_core::sim::Sim::new(&ipisim_core::resolve(&req).unwrap()).unwrap()
}

/// A built-in machine profile, resolved.
fn machine(name: &str) -> Machine {
    let req = RunRequest {
        scenario: "shootdown".into(),
        machine: Some(name.into()),
        kernel: None,
        sets: vec![],
        seed: 1,
    };
    let r = ipisim_core::resolve(&req).unwrap();
    let k = ipisim_core::kernel::KernelConfig::from_resolved(&r).unwrap();
    Machine::from_resolved(&r, k.spinlock).unwrap()
}

/// One sender, `threads` busy CPUs in the mm: both designs send one IPI per target per call
/// (3.8's lone target goes through smp_call_function_single); the counts are identical.
#[test]
fn one_ipi_per_target_in_both_designs() {
    for threads in [1usize, 2, 12, 47] {
        let th = threads.to_string();
        let mut counts = Vec::new();
        for cf in ["global_cfd", "percpu_csd"] {
            let sets = [
                ("remote_threads", th.as_str()),
                ("batch", "1"),
                ("kernel.call_function", cf),
            ];
            let j = result("shootdown", "linux-4.3", &sets);
            assert_eq!(
                j["ipis_sent"].as_u64().unwrap(),
                512 * threads as u64,
                "{cf}"
            );
            counts.push(tlb(&j));
        }
        assert_eq!(counts, vec![512 * threads as u64; 2], "{threads} threads");
    }
}

/// Many concurrent senders (tlb_flush2, 16 threads): with the global queue every handler walks
/// every pending request and all senders and last targets share call_function.lock, so the
/// handler and lock time appear and throughput falls; per-CPU queues have neither.
#[test]
fn the_global_queue_is_walked_by_every_handler() {
    let run_with = |cf: &str| {
        let sets = [
            ("mode", "thread"),
            ("duration", "5ms"),
            ("machine.nodes", "2"),
            ("machine.cpus_per_node", "8"),
            ("kernel.call_function", cf),
        ];
        result("will-it-scale/tlb_flush2", "linux-4.3", &sets)
    };
    let (global, percpu) = (run_with("global_cfd"), run_with("percpu_csd"));
    let walk = "generic_smp_call_function_interrupt";
    assert!(profile_percent(&global, walk) > 0.0);
    assert_eq!(profile_percent(&percpu, walk), 0.0);
    assert!(profile_percent(&global, "_raw_spin_lock") > 0.0);
    let loops = |j: &Value| j["ops"]["loops_per_s"].as_f64().unwrap();
    assert!(loops(&global) < loops(&percpu));
}

/// The cache-line model: a transfer to another socket costs more than one within the socket,
/// which costs more than one between SMT siblings (xeon-2s-2013: 16 CPUs a node, 2 per core,
/// numbered as Linux does: CPUs 0-7 are node 0's cores, 8-15 node 1's, 16-31 their siblings).
#[test]
fn a_cross_socket_line_transfer_costs_more_than_a_same_socket_one() {
    let m = machine("xeon-2s-2013");
    assert_eq!(
        (m.node_of(7), m.node_of(8), m.node_of(16), m.node_of(24)),
        (0, 1, 0, 1)
    );
    let (smt, node, remote) = (
        m.line_transfer(0, 16),
        m.line_transfer(0, 1),
        m.line_transfer(0, 8),
    );
    assert!(
        0 < smt && smt < node && node < remote,
        "{smt} {node} {remote}"
    );
    assert_eq!(m.line_transfer(3, 3), 0);
    // POWER9 (SMT4): Linux numbers a core's four threads in a row; node 1 starts at CPU 64.
    let p9 = machine("power9-128c");
    assert_eq!(p9.line_transfer(0, 3), p9.line_transfer(0, 1));
    assert!(p9.line_transfer(0, 1) < p9.line_transfer(0, 4));
    assert_eq!((p9.node_of(63), p9.node_of(64)), (0, 1));
}

/// To 3.13 each CPU's call queue was a list under a spinlock (6897fc22ea01 made it an llist):
/// one sender, one target on another core of its node, 512 calls. Each call's queue line changes
/// hands twice either way (sender adds: the lock, or llist_add()'s cmpxchg on the head; handler
/// detaches: the lock, or llist_del_all()'s xchg), each hand-off one line transfer on the call's
/// path. The lock's line starts on the sender's CPU, the head's on its own: the llist pays exactly
/// one transfer more, with the same IPIs, and no spinlock time.
#[test]
fn a_call_queue_line_pays_a_transfer_per_hand_off_lock_or_llist() {
    let run_with = |queue: &str| {
        let sets = [
            ("remote_threads", "1"),
            ("batch", "1"),
            ("kernel.call_single_queue", queue),
        ];
        result("shootdown", "linux-3.9", &sets)
    };
    let (llist, locked) = (run_with("llist"), run_with("spinlock"));
    assert_eq!(llist["ipis_sent"], 512);
    assert_eq!(locked["ipis_sent"], 512);
    let ps = |j: &Value| (j["ops"]["op_time_s"].as_f64().unwrap() * 1e12).round() as u64;
    let m = machine("xeon-4n-48c-64g");
    assert_eq!(ps(&llist) - ps(&locked), m.line_transfer(0, 1));
    for f in ["_raw_spin_lock_irqsave", "_raw_spin_lock"] {
        assert!(
            profile_percent(&locked, f) > profile_percent(&llist, f),
            "{f}"
        );
    }
    // The llist queue takes no lock; the little `_raw_spin_lock` left is release_pages() taking
    // the freed pages off the LRU (the lru_lock's line, docs/kernel/lru-anon-zap.md).
    assert_eq!(profile_percent(&llist, "_raw_spin_lock_irqsave"), 0.0);
    assert!(profile_percent(&llist, "_raw_spin_lock") < 0.01);
}

/// csd_lock(): a request sent without waiting leaves its csd locked until the target has run
/// it, so the next request from the same CPU to the same target spins there, and is made once
/// the csd is free; a request to another target does not wait.
#[test]
fn the_next_request_spins_in_csd_lock_while_the_previous_one_is_pending() {
    use ipisim_core::engine::CpuMask;
    use ipisim_core::sched::{Outcome, SpinOn, Step};
    use ipisim_core::smp::{smp_call_function_many_cond, CallFunc, Cond, NO_CPU};
    let sets = [("cpus", "3"), ("wait", "false")];
    let mut s = sim("ipistorm", "linux-6.18", &sets);
    let to = |cpu: usize| {
        let mut m = CpuMask::new();
        m.set(cpu);
        m
    };
    let call = |s: &mut ipisim_core::sim::Sim, target: usize| {
        let f = CallFunc::DoNothingIpi;
        smp_call_function_many_cond(s, 0, 0, &to(target), f, Cond::Always, false, false)
    };
    assert!(matches!(call(&mut s, 1), Outcome::Busy { .. }));
    assert!(s.smp.locked[0].test(1));
    assert!(matches!(call(&mut s, 2), Outcome::Busy { .. }));
    assert_eq!(call(&mut s, 1), Outcome::Spin(SpinOn::CsdLock));
    assert_eq!(s.smp.csd_lock_on[0], 1);
    assert_eq!(
        s.sched.tasks[0].steps.last(),
        Some(&Step::SmpCallFunctionMany)
    );
    assert_eq!(
        s.smp.queue[1].len(),
        1,
        "the second request is not queued yet"
    );
    // Once CPU 1's handler has run the first csd, CPU 0 sees it free.
    ipisim_core::smp::handler_pass(&mut s, 1, None, Vector::CallFunction, 0);
    assert_eq!(s.smp.csd_lock_on[0], NO_CPU);
    assert!(!s.smp.locked[0].test(1));
}

/// ipistorm without waiting: a CPU can have one request per csd outstanding, so csd_lock() paces
/// it like waiting does. One target each (6.18): exactly the interrupts of the waiting run, one
/// per call, with at most one call per CPU unhandled at the end. Broadcasts on 3.8 (one
/// cfd_data per CPU; IPIs to a CPU already in its handler merge): calls within 5 %, as the
/// senders that do not wait keep the global queue fuller and every handler walks all of it.
#[test]
fn asynchronous_ipistorm_is_paced_by_csd_lock() {
    let run = |kernel: &str, single: &str, wait: &str| {
        // One target each: node 0's six cores, every target the same wire away.
        let cpus = if single == "true" { "6" } else { "8" };
        let sets = [
            ("cpus", cpus),
            ("offset", "1"),
            ("single", single),
            ("duration", "200us"),
            ("wait", wait),
        ];
        run_json("ipistorm", "xeon-4n-48c-64g", kernel, &sets)
    };
    let n = |j: &Value, k: &str| j["ops"][k].as_u64().unwrap();
    let (sync, not) = (
        run("linux-6.18", "true", "true"),
        run("linux-6.18", "true", "false"),
    );
    let irqs = n(&sync, "call_function_interrupts");
    assert_eq!(n(&not, "call_function_interrupts"), irqs);
    assert_eq!(n(&sync, "calls"), irqs);
    assert!(n(&not, "calls") - irqs <= 6, "{} calls", n(&not, "calls"));
    let (sync, not) = (
        run("linux-3.8", "false", "true"),
        run("linux-3.8", "false", "false"),
    );
    let (a, b) = (n(&sync, "calls"), n(&not, "calls"));
    assert!(
        a > 100 && a.abs_diff(b) <= a / 20,
        "3.8: {a} calls waiting, {b} not"
    );
}

/// A request queued behind another on a 3.9 call_single_queue: list_add_tail() writes the
/// earlier csd's line under the queue lock, so the second sender pays three line transfers (the
/// busy ticket lock's two, 3.9's hand-off, and that csd's) and two csd_queue, the first holder's
/// hold included: exactly.
#[test]
fn list_add_tail_writes_the_queued_csd() {
    use ipisim_core::engine::CpuMask;
    use ipisim_core::machine::Cost;
    use ipisim_core::sched::Outcome;
    use ipisim_core::smp::{smp_call_function_many_cond, CallFunc, Cond};
    let mut s = sim("ipistorm", "linux-3.9", &[("cpus", "3")]);
    let mut to = CpuMask::new();
    to.set(2);
    let f = CallFunc::DoNothingIpi;
    let first = smp_call_function_many_cond(&mut s, 0, 0, &to, f, Cond::Always, false, false);
    assert!(matches!(first, Outcome::Busy { .. }));
    let second = smp_call_function_many_cond(&mut s, 1, 1, &to, f, Cond::Always, false, false);
    let m = machine("xeon-4n-48c-64g");
    let ps = 2 * m.cost[Cost::CsdQueue] + 3 * m.line_transfer(0, 1);
    // No IPI: CPU 2's queue was not empty, and 3.9 sends a lone target's only if it was. IRQs
    // off: the add is under raw_spin_lock_irqsave().
    assert_eq!(second, Outcome::Busy { ps, irqs_off: true });
    assert_eq!(s.smp.queue[2].len(), 2);
}

/// linux-3.8 with 5 CPUs: CPUs 0, 1 and 4, in that order, call CPUs 2 and 3 on the global queue.
fn three_senders_on_the_global_queue() -> ipisim_core::sim::Sim {
    use ipisim_core::engine::CpuMask;
    use ipisim_core::smp::{smp_call_function_many_cond, CallFunc, Cond};
    let sets = [("cpus", "5"), ("single", "false")];
    let mut s = sim("ipistorm", "linux-3.8", &sets);
    let mut to = CpuMask::new();
    to.set(2);
    to.set(3);
    for sender in [0, 1, 4] {
        let f = CallFunc::DoNothingIpi;
        smp_call_function_many_cond(&mut s, sender, sender, &to, f, Cond::Always, false, false);
    }
    s
}

/// The 3.8 global list: list_add_rcu() at the head writes the old first cfd's line, and the last
/// target's list_del_rcu() writes each neighbouring cfd's line. Three senders to CPUs 2 and 3,
/// then both handlers: every line's writes, counted exactly.
#[test]
fn the_global_list_writes_its_neighbours_lines() {
    use ipisim_core::smp::handler_pass;
    let mut s = three_senders_on_the_global_queue();
    assert_eq!(s.smp.global.queue, vec![4, 1, 0]);
    let writes =
        |s: &ipisim_core::sim::Sim| [0, 1, 4].map(|c| s.smp.global.cfd[c].line.acquisitions);
    // Each sender fills its own cfd; CPUs 1 and 4 also set the prev of 0's and 1's.
    assert_eq!(writes(&s), [2, 2, 1]);
    // The handlers run once all three are published (list_add_rcu and refs set, 1 us).
    handler_pass(&mut s, 2, None, Vector::CallFunction, US);
    assert_eq!(writes(&s), [3, 3, 2], "one read-modify-write each");
    // CPU 3 is the last target of all three: unlinking 4 writes 1's line, unlinking 1 writes 0's.
    handler_pass(&mut s, 3, None, Vector::CallFunction, US);
    assert_eq!(writes(&s), [5, 5, 3]);
    assert!(s.smp.global.queue.is_empty());
}

/// skip_ipi_if_queued (4.13): a target whose call queue already holds a csd gets none, exactly;
/// without it every target of a multi-CPU call gets one. CPU 1 holds CPU 3's csd when CPU 0
/// calls CPUs 1 and 2.
#[test]
fn no_ipi_to_a_target_whose_queue_is_not_empty() {
    use ipisim_core::engine::CpuMask;
    use ipisim_core::smp::{smp_call_function_many_cond, CallFunc, Cond};
    for (skip, ipis) in [("true", 2), ("false", 3)] {
        let sets = [
            ("cpus", "5"),
            ("single", "false"),
            ("kernel.skip_ipi_if_queued", skip),
        ];
        let mut s = sim("ipistorm", "linux-4.3", &sets);
        let mask = |cpus: &[usize]| {
            let mut m = CpuMask::new();
            cpus.iter().for_each(|&c| m.set(c));
            m
        };
        let f = CallFunc::DoNothingIpi;
        smp_call_function_many_cond(&mut s, 3, 3, &mask(&[1]), f, Cond::Always, false, false);
        assert_eq!(s.obs.stats.ipis_sent, 1);
        smp_call_function_many_cond(&mut s, 0, 0, &mask(&[1, 2]), f, Cond::Always, false, false);
        assert_eq!(s.obs.stats.ipis_sent, ipis, "skip_ipi_if_queued={skip}");
        assert_eq!((s.smp.queue[1].len(), s.smp.queue[2].len()), (2, 1));
    }
}

/// The sending worker as perf shows it: smp_call_function_many() before 5.6 (4.3 here),
/// smp_call_function_many_cond() after (6.18); never both.
#[test]
fn the_sender_is_named_as_in_its_kernel() {
    let sets = [("remote_threads", "2"), ("batch", "1")];
    for (kernel, name, other) in [
        (
            "linux-4.3",
            "smp_call_function_many",
            "smp_call_function_many_cond",
        ),
        (
            "linux-6.18",
            "smp_call_function_many_cond",
            "smp_call_function_many",
        ),
    ] {
        let j = result("shootdown", kernel, &sets);
        assert!(profile_percent(&j, name) > 0.0, "{kernel}: {name}");
        assert_eq!(profile_percent(&j, other), 0.0, "{kernel}: {other}");
    }
}

/// The APIC send loop is named by machine.apic: x2APIC cluster mode on the 4-socket Xeon, xAPIC
/// physical mode on the 2-socket one (seed 003's profile), KVM's PV IPI on the development guest.
#[test]
fn the_send_loop_is_named_by_the_apic_mode() {
    let sends = [
        "default_send_IPI_mask_sequence_phys",
        "__x2apic_send_IPI_mask",
        "__send_ipi_mask",
    ];
    for (machine, send) in [
        ("xeon-2s-2013", sends[0]),
        ("xeon-4n-48c-64g", sends[1]),
        ("host-2cpu", sends[2]),
    ] {
        let j = run_json("shootdown", machine, "linux-6.18", &[("batch", "1")]);
        for other in sends {
            let share = profile_percent(&j, other);
            assert_eq!(share > 0.0, other == send, "{machine}: {other} {share}");
        }
    }
}

/// `shootdown` on the 4-socket Xeon before anything ran: CPU 0 is switching to the main thread,
/// the other CPUs are idle.
fn before_the_run() -> ipisim_core::sim::Sim {
    sim("shootdown", "linux-4.3", &[])
}

/// When `cpu`'s busy step ends.
fn busy_until(s: &ipisim_core::sim::Sim, cpu: usize) -> u64 {
    match s.sched.cpus[cpu].mode {
        ipisim_core::sched::Mode::Busy { until } => until,
        m => panic!("CPU {cpu} is not busy: {m:?}"),
    }
}

/// An interrupted step ends as many handler lengths later as interrupts it took: a second IPI
/// that arrives during the first handler is taken at its exit, and delays the step by its own
/// handler, not by what is left of the first one (a bug until 2026-11-24: the step lost the
/// first handler's time).
#[test]
fn back_to_back_interrupts_each_delay_the_interrupted_step() {
    use ipisim_core::machine::Cost;
    use ipisim_core::sched::{ipi_arrive, Mode};
    let mut s = before_the_run();
    // CPU 0 is switching to the main thread: a busy step (taken here as one with IRQs on).
    let until = busy_until(&s, 0);
    s.sched.cpus[0].irqs_off = false;
    let handler = s.m.cost[Cost::IrqEntryExit];
    ipi_arrive(&mut s, 0, Vector::CallFunction);
    ipi_arrive(&mut s, 0, Vector::CallFunction);
    assert_ne!(
        s.sched.cpus[0].irq_pending, 0,
        "the second IPI waits for the first handler"
    );
    s.run(2 * handler + 1, &mut |_, _| {});
    assert_eq!(s.sched.cpus[0].irq_pending, 0);
    assert_eq!(
        s.sched.cpus[0].mode,
        Mode::Busy {
            until: until + 2 * handler
        }
    );
}

/// A CPU spinning in user space takes two IPIs back to back: the spin is charged only for the
/// time it spun, not again for the first handler (a bug until 2026-11-24: the re-entry charged
/// the first handler's length as spin time).
#[test]
fn back_to_back_interrupts_are_not_charged_as_spinning() {
    use ipisim_core::machine::Cost;
    use ipisim_core::sched::{ipi_arrive, Mode, SpinOn};
    let mut s = before_the_run();
    // The main thread on CPU 0, taken as spinning in user space from time 0.
    s.sched.cpus[0].mode = Mode::Spin(SpinOn::UserForever);
    let t = s.sched.cpus[0].task.unwrap();
    let user = s.obs.stats.tasks[t].times.user;
    let handler = s.m.cost[Cost::IrqEntryExit];
    ipi_arrive(&mut s, 0, Vector::CallFunction);
    ipi_arrive(&mut s, 0, Vector::CallFunction);
    let spun = 1000;
    s.run(2 * handler + spun, &mut |_, _| {});
    assert_eq!(s.obs.stats.tasks[t].times.user - user, spun);
}

/// A halted idle CPU wakes up for the first of two IPIs that arrive together; the second is
/// taken right after the first handler's iret, with no second wakeup (a bug until 2026-11-24).
#[test]
fn an_idle_cpu_wakes_once_for_back_to_back_interrupts() {
    use ipisim_core::machine::Cost;
    use ipisim_core::observe::Irq;
    use ipisim_core::sched::{ipi_arrive, Mode};
    let mut s = before_the_run();
    assert_eq!(s.sched.cpus[5].mode, Mode::Idle);
    let (handler, wakeup) = (s.m.cost[Cost::IrqEntryExit], s.m.cost[Cost::IdleWakeup]);
    ipi_arrive(&mut s, 5, Vector::CallFunction);
    ipi_arrive(&mut s, 5, Vector::CallFunction);
    s.run(wakeup + 2 * handler + 1, &mut |_, _| {});
    assert!(!s.sched.cpus[5].in_irq(s.now()), "both handlers are over");
    assert_eq!(s.obs.stats.irqs[Irq::Cal as usize][5], 2, "two interrupts");
}

/// A vCPU in guest mode leaves the guest once for two IPIs taken back to back, and enters it
/// again once (a bug until 2026-11-24: each paid an exit and an entry).
#[test]
fn a_vcpu_leaves_the_guest_once_for_back_to_back_interrupts() {
    use ipisim_core::machine::Cost;
    use ipisim_core::sched::{ipi_arrive, Mode};
    let mut s = before_the_run();
    // CPU 0's busy step, taken as guest code with IRQs on.
    let until = busy_until(&s, 0);
    (s.sched.cpus[0].irqs_off, s.sched.cpus[0].in_guest) = (false, true);
    let (handler, guest) = (s.m.cost[Cost::IrqEntryExit], s.m.cost[Cost::GuestExit]);
    ipi_arrive(&mut s, 0, Vector::CallFunction);
    ipi_arrive(&mut s, 0, Vector::CallFunction);
    s.run(guest + 2 * handler + 1, &mut |_, _| {});
    assert_eq!(
        s.sched.cpus[0].mode,
        Mode::Busy {
            until: until + guest + 2 * handler
        }
    );
}

/// A task woken while its CPU runs a handler over a thread spinning in user space runs when the
/// handler returns to user space (NEED_RESCHED), not never (a gap until 2026-11-24: the spinner
/// reaches no step boundary where it would notice). The spinner is 10 ms of virtual run time ahead
/// of its queue, so CFS places the sleeper more than the wakeup granularity behind it.
#[test]
fn a_wakeup_during_a_handler_preempts_a_user_spin_at_its_return() {
    use ipisim_core::machine::Cost;
    use ipisim_core::sched::{ipi_arrive, spawn_at, wake, Mode, SpinOn};
    let mut s = before_the_run();
    // CPU 0's task, taken as spinning in user space; another task of its process sleeps there.
    s.sched.cpus[0].mode = Mode::Spin(SpinOn::UserForever);
    let spinner = s.sched.cpus[0].task.unwrap();
    s.sched.tasks[spinner].se.vruntime += 10_000_000_000;
    let mm = s.sched.tasks[spinner].mm;
    let sleeper = spawn_at(&mut s, mm, 0, u64::MAX);
    let handler = s.m.cost[Cost::IrqEntryExit];
    ipi_arrive(&mut s, 0, Vector::CallFunction);
    wake(&mut s, sleeper);
    assert_eq!(
        s.sched.cpus[0].task,
        Some(spinner),
        "not during the handler"
    );
    s.run(handler + 1, &mut |_, _| {});
    assert_eq!(s.sched.cpus[0].task, Some(sleeper));
    assert_eq!(s.sched.cpus[0].runq.tasks(), vec![spinner]);
}

/// csd_lock_wait() waits for the csds of its own call: a request sent earlier without waiting
/// finishing first does not end it (a latent bug until 2026-11-24: one count of outstanding csds
/// per sender took any unlock as one of its own).
#[test]
fn a_waiting_call_waits_for_its_own_targets() {
    use ipisim_core::engine::CpuMask;
    use ipisim_core::smp::{handler_pass, smp_call_function_many_cond};
    use ipisim_core::smp::{CallFunc, Cond};
    let sets = [("cpus", "3"), ("wait", "false")];
    let mut s = sim("ipistorm", "linux-6.18", &sets);
    let call = |s: &mut ipisim_core::sim::Sim, target: usize, wait: bool| {
        let mut m = CpuMask::new();
        m.set(target);
        let f = CallFunc::DoNothingIpi;
        smp_call_function_many_cond(s, 0, 0, &m, f, Cond::Always, wait, false);
    };
    call(&mut s, 1, false);
    call(&mut s, 2, true);
    assert_eq!(s.smp.waiting[0], 1);
    handler_pass(&mut s, 1, None, Vector::CallFunction, 0);
    assert_eq!(s.smp.waiting[0], 1, "CPU 1 ran the call nobody waits for");
    handler_pass(&mut s, 2, None, Vector::CallFunction, 0);
    assert_eq!(s.smp.waiting[0], 0);
}

/// The handler reads the call queue when its pass starts, after the idle wakeup and the entry,
/// not when the IPI arrives: a csd queued in between is run by the same pass, and its sender,
/// finding the queue not empty, sends no IPI (llist_add; a bug until 2026-11-24: the queue was
/// emptied at the arrival, so the second call sent an IPI and cost a second interrupt).
#[test]
fn a_csd_queued_before_the_handler_starts_is_run_by_it() {
    use ipisim_core::engine::CpuMask;
    use ipisim_core::observe::Irq;
    use ipisim_core::smp::{smp_call_function_many_cond, CallFunc, Cond};
    // Three storm threads (CPUs 0-2, calling each other); CPU 10 is idle and halted.
    let mut s = sim("ipistorm", "linux-6.18", &[("cpus", "3")]);
    let mut ten = CpuMask::new();
    ten.set(10);
    let call = |s: &mut ipisim_core::sim::Sim, from: usize| {
        let f = CallFunc::DoNothingIpi;
        smp_call_function_many_cond(s, from, from, &ten, f, Cond::Always, false, false);
    };
    call(&mut s, 0);
    use ipisim_core::machine::Cost;
    // The send waits for llist_add() to take CPU 10's head line from CPU 10's cache.
    let arrival = s.m.cost[Cost::CsdQueue]
        + s.m.line_transfer(10, 0)
        + s.m.cost[Cost::IpiSend]
        + s.m.ipi_wire(0, 10);
    s.run(arrival + 1, &mut |_, _| {});
    assert!(
        s.sched.cpus[10].in_irq(s.now()),
        "CPU 10 is waking up for it"
    );
    assert_eq!(s.smp.queue[10].len(), 1, "not read yet");
    s.end = None;
    call(&mut s, 1);
    assert_eq!(s.obs.stats.ipis_sent, 1, "the queue was not empty");
    s.run(arrival + 10_000_000, &mut |_, _| {});
    assert!(s.smp.queue[10].is_empty());
    assert!(!s.smp.locked[0].test(10) && !s.smp.locked[1].test(10));
    assert_eq!(s.obs.stats.irqs[Irq::Cal as usize][10], 1, "one interrupt");
}

/// smp_call_function_many() queues on each target at that target's turn in its loop: with an
/// event due before the second target's turn (its handler could take that queue's lock first),
/// the loop stops after the first target and goes on as a step of its own, and no IPI is sent
/// yet; with nothing due, both are queued and both IPIs sent at once (a bug until 2026-11-24:
/// the whole loop was worked out at the call, taking each lock ahead of events not yet run).
#[test]
fn the_send_loop_queues_each_target_at_its_own_time() {
    use ipisim_core::engine::CpuMask;
    use ipisim_core::sched::{Outcome, Step};
    use ipisim_core::smp::{smp_call_function_many_cond, CallFunc, Cond};
    use ipisim_core::step::Event;
    for event_due in [false, true] {
        let mut s = sim("shootdown", "linux-3.9", &[]);
        if event_due {
            s.q.schedule(
                1,
                Event::IpiArrive {
                    cpu: 30,
                    vector: Vector::CallFunction,
                    flow: 0,
                },
            );
        }
        let mut m = CpuMask::new();
        m.set(1);
        m.set(2);
        let f = CallFunc::DoNothingIpi;
        let out = smp_call_function_many_cond(&mut s, 0, 0, &m, f, Cond::Always, true, false);
        assert!(matches!(out, Outcome::Busy { .. }));
        let queued = (s.smp.queue[1].len(), s.smp.queue[2].len());
        if event_due {
            assert_eq!(queued, (1, 0));
            assert_eq!(s.sched.tasks[0].steps.last(), Some(&Step::QueueCsds));
            assert_eq!(s.obs.stats.ipis_sent, 0);
        } else {
            assert_eq!(queued, (1, 1));
            assert_eq!(s.sched.tasks[0].steps.last(), Some(&Step::CsdLockWait));
            assert_eq!(s.obs.stats.ipis_sent, 2);
        }
    }
}

/// A handler's pass runs its csds at their own times: with an event due before the second csd's
/// turn, it stops after the first (whose sender sees it done) and goes on later; without one it
/// runs both at once (a bug until 2026-11-24: the whole pass was worked out when it started).
#[test]
fn a_handler_pass_stops_where_another_event_is_due() {
    use ipisim_core::engine::CpuMask;
    use ipisim_core::smp::{begin_pass, smp_call_function_many_cond, CallFunc, Cond};
    use ipisim_core::step::Event;
    for event_due in [false, true] {
        // A slow wire: the senders' own IPIs arrive after the pass.
        let mut s = sim(
            "shootdown",
            "linux-6.18",
            &[("machine.cost.ipi_wire_node", "5000")],
        );
        let mut one = CpuMask::new();
        one.set(1);
        for sender in [2, 3] {
            let f = CallFunc::DoNothingIpi;
            smp_call_function_many_cond(&mut s, sender, 0, &one, f, Cond::Always, false, false);
        }
        // The pass begins once both llist_add()s are done; its llist_del_all() takes the head's
        // line from CPU 3, and the event comes just after the first csd's turn.
        let start = 1_000_000;
        if event_due {
            let first = start + s.m.line_transfer(3, 1);
            s.q.schedule(
                first + 1,
                Event::IpiArrive {
                    cpu: 30,
                    vector: Vector::CallFunction,
                    flow: 0,
                },
            );
        }
        let end = begin_pass(&mut s, 1, None, start, Vector::CallFunction, true);
        assert!(s.smp.queue[1].is_empty(), "both detached");
        assert!(!s.smp.locked[2].test(1), "the first csd ran");
        assert_eq!(end.is_none(), event_due);
        assert_eq!(s.smp.locked[3].test(1), event_due, "the second csd");
    }
}

/// 3.8's walk of the global queue sees the cfds queued when it began (list_add_rcu puts a new one
/// at the head, behind the walker): CPU 1's walk, begun at 1 us once CPU 2's cfd is published,
/// stops before its first entry; CPU 3 then queues a second call to CPUs 1 and 4; the walk goes
/// on and runs only CPU 2's. Once CPU 4 has run both, CPU 2's is unlinked and CPU 3's still waits
/// for CPU 1.
#[test]
fn the_global_walk_does_not_see_a_cfd_queued_after_it_began() {
    use ipisim_core::engine::CpuMask;
    use ipisim_core::smp::{begin_pass, continue_pass, handler_pass};
    use ipisim_core::smp::{smp_call_function_many_cond, CallFunc, Cond};
    use ipisim_core::step::Event;
    let mut s = sim("shootdown", "linux-3.8", &[]);
    let mut both = CpuMask::new();
    both.set(1);
    both.set(4);
    let call = |s: &mut ipisim_core::sim::Sim, from: usize| {
        let f = CallFunc::DoNothingIpi;
        smp_call_function_many_cond(s, from, 0, &both, f, Cond::Always, false, false);
    };
    call(&mut s, 2);
    s.q.schedule(
        US + 1,
        Event::IpiArrive {
            cpu: 30,
            vector: Vector::CallFunction,
            flow: 0,
        },
    );
    assert_eq!(
        begin_pass(&mut s, 1, None, US, Vector::CallFunction, true),
        None
    );
    call(&mut s, 3);
    assert_eq!(s.smp.global.queue, vec![3, 2]);
    assert!(continue_pass(&mut s, 1, None, false).is_some());
    handler_pass(&mut s, 4, None, Vector::CallFunction, US);
    assert_eq!(s.smp.global.queue, vec![3]);
}

/// 3.8's smp_call_function_many() takes call_function.lock with raw_spin_lock_irqsave(), so its
/// wait there is `_raw_spin_lock_irqsave` time, not `_raw_spin_lock` (seed 003's 3.8 profile
/// lists no smp_call_function_many under _raw_spin_lock; a bug until 2026-11-24). Three senders
/// queue at once: the second and third wait for the lock, and only as irqsave.
#[test]
fn the_global_queue_lock_is_taken_with_irqsave() {
    use ipisim_core::observe::Func;
    let s = three_senders_on_the_global_queue();
    assert!(s.obs.stats.profile[Func::RawSpinLockIrqsave as usize] > 0);
    assert_eq!(s.obs.stats.profile[Func::RawSpinLock as usize], 0);
    assert_eq!(
        s.obs.stats.lock_callers[Func::SmpCallFunctionMany as usize],
        0
    );
}

/// To 3.13 the handler detaches its queue with list_replace_init() under q->lock, which sets the
/// first csd's prev and the last csd's next: both lines come over while the lock is held, and
/// are at hand when the csds run. Two csds queued on CPU 2, its pass, then a third sender: the
/// lock is free only at the pass's end (a bug until 2026-11-24: the handler held it for no time,
/// and read the two lines after releasing it).
#[test]
fn list_replace_init_holds_the_queue_lock_for_the_first_and_last_csds() {
    use ipisim_core::engine::CpuMask;
    use ipisim_core::machine::Cost;
    use ipisim_core::sched::Outcome;
    use ipisim_core::smp::{begin_pass, smp_call_function_many_cond, CallFunc, Cond};
    let mut s = sim("ipistorm", "linux-3.9", &[("cpus", "5")]);
    let mut to = CpuMask::new();
    to.set(2);
    let f = CallFunc::DoNothingIpi;
    for sender in [0, 1] {
        smp_call_function_many_cond(&mut s, sender, sender, &to, f, Cond::Always, false, false);
    }
    let end = begin_pass(&mut s, 2, None, 0, Vector::CallFunction, false)
        .expect("a pass that does not stop ends");
    let third = smp_call_function_many_cond(&mut s, 3, 3, &to, f, Cond::Always, false, false);
    // The queue was empty again: csd_queue, the lock from CPU 2 once it is free (a ticket
    // lock's hand-off: two transfers), one IPI.
    let m = &s.m;
    let ps = end + m.lock_handoff(2, 3, 1) + m.cost[Cost::CsdQueue] + m.cost[Cost::IpiSend];
    // IRQs off: under the queue lock, then in the send's local_irq_save().
    assert_eq!(third, Outcome::Busy { ps, irqs_off: true });
}

/// The IPI costs of the two Xeon profiles are fitted to Nadav Amit's bare-metal shootdowns (LKML
/// 2019-05-25, MADV_DONTNEED + touch of one page on a Haswell): one remote thread to shoot down
/// adds 775 ns, three add 910 ns. Nothing checked the fit, and by 2026-11-28 model changes had
/// moved the one-remote figure to 867 ns; this pins both to 1 ns.
#[test]
fn the_xeon_profiles_simulate_amits_shootdowns() {
    let ns = |machine: &str, remote: &str, threads: &str| {
        let sets = [
            ("batch", "1"),
            ("remote", remote),
            ("remote_threads", threads),
        ];
        let j = run_json("shootdown", machine, "linux-6.18", &sets);
        j["ops"]["ns_per_syscall"].as_f64().unwrap()
    };
    for (machine, anchors) in [
        ("xeon-4n-48c-64g", &[("1", 775.0), ("3", 910.0)][..]),
        ("xeon-2s-2013", &[("1", 775.0)][..]),
    ] {
        let alone = ns(machine, "none", "1");
        for &(threads, added) in anchors {
            let busy = ns(machine, "busy", threads);
            assert!(
                (busy - alone - added).abs() < 1.0,
                "{machine}, {threads} remote: {:.1} ns, Amit {added} ns",
                busy - alone
            );
        }
    }
}

/// Two senders queue on CPU 1 at once (6.x, llist): the first's llist_add() takes the head's line
/// from CPU 1, the second's cmpxchg waits for it and then takes the line from the first sender, so
/// its loop ends one transfer later; it sends no IPI, the queue being non-empty.
#[test]
fn two_senders_take_a_call_queue_head_in_turn() {
    use ipisim_core::engine::CpuMask;
    use ipisim_core::machine::Cost;
    use ipisim_core::sched::Outcome;
    use ipisim_core::smp::{smp_call_function_many_cond, CallFunc, Cond};
    let mut s = sim("shootdown", "linux-6.18", &[]);
    let mut one = CpuMask::new();
    one.set(1);
    let busy = |s: &mut ipisim_core::sim::Sim, sender: usize| {
        let f = CallFunc::DoNothingIpi;
        match smp_call_function_many_cond(s, sender, 0, &one, f, Cond::Always, false, false) {
            Outcome::Busy { ps, .. } => ps,
            _ => panic!("the send loop is busy time"),
        }
    };
    let (first, second) = (busy(&mut s, 0), busy(&mut s, 2));
    let (queue, m) = (s.m.cost[Cost::CsdQueue], &s.m);
    assert_eq!(first, queue + m.line_transfer(1, 0) + m.cost[Cost::IpiSend]);
    assert_eq!(
        second,
        queue + m.line_transfer(1, 0) + m.line_transfer(0, 2)
    );
    assert_eq!(s.obs.stats.ipis_sent, 1);
}
