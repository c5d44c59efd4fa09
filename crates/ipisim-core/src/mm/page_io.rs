//! The swap device (mm/page_io.c and the block layer): swap_writepage() submits a write bio and
//! returns; the device serves writes one after another at `machine.swap_bandwidth`, each
//! completing `machine.swap_latency` later; end_swap_bio_write() ends the writeback and
//! rotate_reclaimable_page() puts the page at the tail of its inactive list, where the next pass
//! frees it. A submitter sleeps while the request queue is full (get_request()).
//! With neither bandwidth nor latency the device is RAM-backed and pageout() writes synchronously.

use std::collections::VecDeque;

use super::filemap::{PG_LRU, PG_WRITEBACK};
use super::{Host, Memory};
use crate::engine::{Time, PS_PER_S};

/// BLKDEV_MAX_RQ: the request queue's default nr_requests.
pub const BLKDEV_MAX_RQ: usize = 128;

/// Writes in flight, in completion order (the device serves them first come, first served).
#[derive(Debug, Default)]
pub struct SwapDevice {
    /// When the device finishes the last write it accepted.
    busy_until: Time,
    in_flight: VecDeque<(Time, u32)>,
}

/// A block device with its own time: writes are asynchronous.
pub fn is_async(s: &impl Host) -> bool {
    let m = s.mm_view().1;
    m.swap_bandwidth > 0 || m.swap_latency > 0
}

/// submit_bio() of one page write at `now`; Err(when a request frees up) if the queue is full.
pub fn submit(s: &mut impl Host, now: Time, pfn: u32) -> Result<(), Time> {
    complete(s, now);
    let p = s.mm_parts();
    let (m, mem) = (p.m, p.mem);
    let dev = &mut mem.swap_io;
    if dev.in_flight.len() >= BLKDEV_MAX_RQ {
        return Err(dev.in_flight[0].0);
    }
    let transfer = (4096 * PS_PER_S).checked_div(m.swap_bandwidth).unwrap_or(0);
    dev.busy_until = dev.busy_until.max(now) + transfer;
    dev.in_flight
        .push_back((dev.busy_until + m.swap_latency, pfn));
    mem.page[pfn as usize].flags |= PG_WRITEBACK;
    Ok(())
}

/// Pages of `node` under writeback: off the model's lists, but on the kernel's inactive list
/// (shrink_page_list keeps them there), so NR_INACTIVE_ANON counts them.
pub fn under_writeback(mem: &Memory, node: usize) -> usize {
    let io = &mem.swap_io.in_flight;
    io.iter()
        .filter(|&&(_, pfn)| mem.frames.node_of(pfn) == node)
        .count()
}

/// end_swap_bio_write() for every write done by `now`: end_page_writeback() and
/// rotate_reclaimable_page() to the tail of the page's inactive anonymous list. Completions are
/// applied when reclaim next looks at the lists or the queue, in completion order.
pub fn complete(s: &mut impl Host, now: Time) {
    let mem = s.mm_parts().mem;
    while let Some(&(done, pfn)) = mem.swap_io.in_flight.front() {
        if done > now {
            break;
        }
        mem.swap_io.in_flight.pop_front();
        let p = &mut mem.page[pfn as usize];
        p.flags = (p.flags & !PG_WRITEBACK) | PG_LRU;
        let node = mem.frames.node_of(pfn);
        mem.lru[node].anon.inactive.push_back(pfn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunRequest;
    use crate::resolve;
    use crate::sim::Sim;

    fn sim(bandwidth: &str, latency: &str) -> Sim {
        let req = RunRequest {
            scenario: "swapout".into(),
            machine: Some("xeon-2s-2013".into()),
            sets: vec![
                ("scale".into(), "0.002".into()),
                ("machine.swap_bandwidth".into(), bandwidth.into()),
                ("machine.swap_latency".into(), latency.into()),
            ],
            ..Default::default()
        };
        Sim::new(&resolve(&req).unwrap()).unwrap()
    }

    /// 4 KiB at 4 KiB per millisecond: writes finish 1 ms apart in submission order, each
    /// `latency` after its transfer; the 129th submission waits for the first completion.
    #[test]
    fn writes_are_served_in_order_at_the_bandwidth() {
        let mut s = sim("4000KiB", "10us");
        let ms = PS_PER_S / 1000;
        for pfn in 100..100 + BLKDEV_MAX_RQ as u32 {
            assert_eq!(submit(&mut s, 0, pfn), Ok(()));
        }
        let done: Vec<Time> = s.mem.swap_io.in_flight.iter().map(|w| w.0).collect();
        assert_eq!(done[0], ms + 10_000_000);
        assert_eq!(done[2], 3 * ms + 10_000_000);
        assert_eq!(submit(&mut s, 0, 999), Err(ms + 10_000_000));
        // Once the first write is done, it is off the device and on the inactive tail.
        assert_eq!(submit(&mut s, ms + 10_000_000, 999), Ok(()));
        assert_eq!(s.mem.page[100].flags & PG_WRITEBACK, 0);
        let node = s.mem.frames.node_of(100);
        assert_eq!(s.mem.lru[node].anon.inactive.back(), Some(&100));
        assert_eq!(
            s.mem.swap_io.in_flight.back().unwrap().0,
            129 * ms + 10_000_000
        );
    }
}
