//! A fixed-width CPU bitset (like the kernel's `struct cpumask`), up to 1024 CPUs, with no allocation.

pub const MAX_CPUS: usize = 1024;
const WORDS: usize = MAX_CPUS / 64;

#[derive(Clone, Copy)]
pub struct CpuMask {
    w: [u64; WORDS],
    /// Words below this may be non-zero (one past the highest word ever set): scans stop here,
    /// so a 48-CPU machine looks at one word, not sixteen.
    len: u8,
}

impl PartialEq for CpuMask {
    fn eq(&self, o: &Self) -> bool {
        self.w == o.w
    }
}
impl Eq for CpuMask {}

impl Default for CpuMask {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for CpuMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_cpulist())
    }
}

/// The set CPUs of a mask, lowest first (a word at a time: this is on the IPI path).
pub struct Iter<'a> {
    w: &'a [u64],
    /// The word `cur` came from.
    i: usize,
    /// What is left of word `i`.
    cur: u64,
}

impl Iterator for Iter<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        while self.cur == 0 {
            if self.i + 1 >= self.w.len() {
                return None;
            }
            self.i += 1;
            self.cur = self.w[self.i];
        }
        let b = self.cur.trailing_zeros() as usize;
        self.cur &= self.cur - 1;
        Some(self.i * 64 + b)
    }
}

impl CpuMask {
    pub const fn new() -> Self {
        CpuMask {
            w: [0; WORDS],
            len: 0,
        }
    }

    /// The words that may hold set CPUs.
    fn words(&self) -> &[u64] {
        &self.w[..self.len as usize]
    }

    pub fn first_n(n: usize) -> Self {
        let mut m = Self::new();
        for c in 0..n {
            m.set(c);
        }
        m
    }

    pub fn set(&mut self, cpu: usize) {
        self.w[cpu / 64] |= 1 << (cpu % 64);
        self.len = self.len.max((cpu / 64 + 1) as u8);
    }

    pub fn clear(&mut self, cpu: usize) {
        self.w[cpu / 64] &= !(1 << (cpu % 64));
    }

    pub fn test(&self, cpu: usize) -> bool {
        self.w[cpu / 64] & (1 << (cpu % 64)) != 0
    }

    pub fn is_empty(&self) -> bool {
        self.words().iter().all(|&w| w == 0)
    }

    pub fn weight(&self) -> usize {
        self.words().iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn or(&mut self, o: &CpuMask) {
        for (a, b) in self.w.iter_mut().zip(o.words()) {
            *a |= *b;
        }
        self.len = self.len.max(o.len);
    }

    pub fn clear_all(&mut self) {
        *self = Self::new();
    }

    /// `cpumask_any_but(mask, cpu) < nr_cpu_ids`: is any CPU other than `cpu` set?
    pub fn any_but(&self, cpu: usize) -> bool {
        self.words().iter().enumerate().any(|(i, &w)| {
            let w = if i == cpu / 64 {
                w & !(1 << (cpu % 64))
            } else {
                w
            };
            w != 0
        })
    }

    /// `*self`, field by field: a plain copy of the 136 bytes is a call to memcpy (past the 128
    /// bytes a compiler copies inline), and masks are copied on the IPI path.
    #[inline(always)]
    pub fn copied(&self) -> CpuMask {
        let mut m = CpuMask::new();
        m.w = self.w;
        m.len = self.len;
        m
    }

    /// The highest set CPU (what `iter().last()` finds, without visiting the others).
    pub fn last(&self) -> Option<usize> {
        let w = self.words();
        let i = w.iter().rposition(|&x| x != 0)?;
        Some(i * 64 + 63 - w[i].leading_zeros() as usize)
    }

    /// Set CPUs in ascending order, the order `for_each_cpu` visits them.
    pub fn iter(&self) -> Iter<'_> {
        let w = self.words();
        Iter {
            w,
            i: 0,
            cur: w.first().copied().unwrap_or(0),
        }
    }

    /// The kernel's `%*pbl` rendering, e.g. "0-3,8".
    pub fn to_cpulist(&self) -> String {
        let mut out = String::new();
        let mut run: Option<(usize, usize)> = None;
        let flush = |out: &mut String, r: (usize, usize)| {
            if !out.is_empty() {
                out.push(',');
            }
            if r.0 == r.1 {
                out.push_str(&r.0.to_string());
            } else {
                out.push_str(&format!("{}-{}", r.0, r.1));
            }
        };
        for c in self.iter() {
            run = match run {
                Some((a, b)) if b + 1 == c => Some((a, c)),
                Some(r) => {
                    flush(&mut out, r);
                    Some((c, c))
                }
                None => Some((c, c)),
            };
        }
        if let Some(r) = run {
            flush(&mut out, r);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_and_lists() {
        let mut m = CpuMask::new();
        for c in [0, 1, 2, 3, 8, 64, 1023] {
            m.set(c);
        }
        assert_eq!(m.weight(), 7);
        assert_eq!(m.to_cpulist(), "0-3,8,64,1023");
        assert!(m.any_but(0));
        m.clear(1023);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 8, 64]);
        assert_eq!(m.last(), Some(64));
        assert_eq!(m.copied(), m);
        let mut one = CpuMask::new();
        one.set(5);
        assert!(!one.any_but(5));
        assert!(one.any_but(4));
        // Equal sets are equal masks, whichever words were ever used.
        m.clear(64);
        let mut low = CpuMask::new();
        [0, 1, 2, 3, 8].into_iter().for_each(|c| low.set(c));
        assert_eq!(m, low);
        assert_eq!(CpuMask::new().iter().next(), None);
        assert_eq!(CpuMask::new().last(), None);
        assert_eq!(low.last(), Some(8));
    }
}
