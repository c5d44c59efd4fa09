//! SLUB caches as hackbench's socket buffers use them (mm/slub.c): each CPU allocates objects
//! from its current slab, a block of 2^order pages whose order calculate_order() picks from the
//! object size and the number of CPUs. A slab goes back to the page allocator once its last
//! object is freed and no CPU allocates from it (discard_slab; the partial lists and
//! min_partial are not modelled). Slabs above order 0 bypass the per-CPU page lists both ways.

use crate::mm::NONE;

/// slub_max_order = PAGE_ALLOC_COSTLY_ORDER.
const SLUB_MAX_ORDER: u32 = 3;
/// MAX_ORDER - 1: the largest block the buddy allocator has.
const MAX_BLOCK_ORDER: u32 = 10;
const PAGE_SIZE: usize = 4096;
/// Added to a slab's object count while it is some CPU's current slab (never freed then).
const CPU_SLAB: u16 = 0x8000;

/// The kernel's fls(): the position of the highest set bit, 1-based (0 for 0).
fn fls(x: usize) -> u32 {
    usize::BITS - x.leading_zeros()
}

/// slab_order(): the smallest order from which `min_objects` objects fit with at most
/// 1/`fract_leftover` of the slab left over (slub_min_order 0, no reserved bytes).
fn slab_order(size: usize, min_objects: usize, max_order: u32, fract_leftover: usize) -> u32 {
    let mut order = fls(min_objects * size - 1).saturating_sub(12);
    while order <= max_order {
        let slab = PAGE_SIZE << order;
        if slab >= min_objects * size && slab % size <= slab / fract_leftover {
            break;
        }
        order += 1;
    }
    order
}

/// calculate_order(): min_objects = 4 * (fls(nr_cpu_ids) + 1), relaxing first the leftover
/// (1/16, 1/8, 1/4), then the object count, within slub_max_order.
pub fn calculate_order(size: usize, nr_cpu_ids: usize) -> u32 {
    let max_objects = (PAGE_SIZE << SLUB_MAX_ORDER) / size;
    let mut min_objects = (4 * (fls(nr_cpu_ids) as usize + 1)).min(max_objects);
    while min_objects > 1 {
        let mut fraction = 16;
        while fraction >= 4 {
            let order = slab_order(size, min_objects, SLUB_MAX_ORDER, fraction);
            if order <= SLUB_MAX_ORDER {
                return order;
            }
            fraction /= 2;
        }
        min_objects -= 1;
    }
    let order = slab_order(size, 1, SLUB_MAX_ORDER, 1);
    if order <= SLUB_MAX_ORDER {
        return order;
    }
    slab_order(size, 1, MAX_BLOCK_ORDER, 1)
}

/// One kmem_cache: its slab order, and per CPU the slab it allocates from. A slab is named by
/// its first page.
pub struct SlabCache {
    pub order: u32,
    /// Objects per slab.
    pub objects: u16,
    cpu_slab: Vec<u32>,
    /// Per page: objects in use of the slab it heads (plus CPU_SLAB while a CPU's current).
    inuse: Vec<u16>,
    /// Per page: the next page of its slab, NONE after the last.
    next: Vec<u32>,
}

impl SlabCache {
    pub fn new(size: usize, ncpus: usize, frames: usize) -> SlabCache {
        let order = calculate_order(size, ncpus);
        SlabCache {
            order,
            objects: ((PAGE_SIZE << order) / size) as u16,
            cpu_slab: vec![NONE; ncpus],
            inuse: vec![0; frames],
            next: vec![NONE; frames],
        }
    }

    /// This CPU has no slab with a free object: the allocation needs a new slab (new_slab).
    pub fn needs_slab(&self, cpu: usize) -> bool {
        let cur = self.cpu_slab[cpu];
        cur == NONE || self.inuse[cur as usize] >= CPU_SLAB + self.objects
    }

    /// The pages of a new slab become this CPU's current slab; the old one is deactivated
    /// (deactivate_slab) and returned if it is empty, to be discarded.
    pub fn install(&mut self, cpu: usize, pages: &[u32]) -> Option<u32> {
        for w in pages.windows(2) {
            self.next[w[0] as usize] = w[1];
        }
        let last = *pages.last().expect("a slab has pages");
        self.next[last as usize] = NONE;
        self.inuse[pages[0] as usize] = CPU_SLAB;
        let old = std::mem::replace(&mut self.cpu_slab[cpu], pages[0]);
        if old == NONE {
            return None;
        }
        self.inuse[old as usize] -= CPU_SLAB;
        (self.inuse[old as usize] == 0).then_some(old)
    }

    /// An object from this CPU's current slab (the caller made sure it has room).
    pub fn alloc(&mut self, cpu: usize) -> u32 {
        let slab = self.cpu_slab[cpu];
        debug_assert!(!self.needs_slab(cpu));
        self.inuse[slab as usize] += 1;
        slab
    }

    /// Free an object of `slab`: true if the slab is now empty and no CPU's (discard it).
    pub fn free(&mut self, slab: u32) -> bool {
        self.inuse[slab as usize] -= 1;
        self.inuse[slab as usize] == 0
    }

    /// The pages of `slab`, first to last, into `out`.
    pub fn pages(&self, slab: u32, out: &mut Vec<u32>) {
        let mut p = slab;
        while p != NONE {
            out.push(p);
            p = self.next[p as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slab_orders_of_the_skb_caches() {
        // min_objects = 4 * (fls(8) + 1) = 20 on 8 CPUs: 20 x 256 B need 8 KiB, 20 x 512 B 16 KiB.
        assert_eq!(calculate_order(256, 8), 1);
        assert_eq!(calculate_order(512, 8), 2);
        // One CPU: min_objects 8, which one 4 KiB page holds for both.
        assert_eq!(calculate_order(256, 1), 0);
        assert_eq!(calculate_order(512, 1), 0);
        // 48 CPUs: min_objects 28; 28 x 512 B need 14 KiB, so order 2 still (32 objects).
        assert_eq!(calculate_order(512, 48), 2);
        // 3000 bytes: at most 10 fit in 8 pages (2768 bytes over, within 1/8), so order 3.
        assert_eq!(calculate_order(3000, 8), 3);
    }

    #[test]
    fn a_slab_is_discarded_when_its_last_object_goes_and_no_cpu_holds_it() {
        let mut c = SlabCache::new(512, 8, 64);
        assert_eq!((c.order, c.objects), (2, 32));
        assert!(c.needs_slab(3));
        assert_eq!(c.install(3, &[10, 11, 12, 13]), None);
        let a = c.alloc(3);
        assert_eq!(a, 10);
        // Still CPU 3's slab: freeing its only object does not discard it.
        assert!(!c.free(a));
        let b = c.alloc(3);
        // A new slab replaces it: the old one still has an object, so it is kept...
        assert_eq!(c.install(3, &[20, 21, 22, 23]), None);
        // ...until that object is freed.
        assert!(c.free(b));
        let mut pages = Vec::new();
        c.pages(10, &mut pages);
        assert_eq!(pages, [10, 11, 12, 13]);
        // An empty slab is discarded as soon as the CPU moves on.
        assert_eq!(c.install(3, &[30, 31, 32, 33]), Some(20));
    }
}
