//! A fixed-size set of small integers.

/// A fixed-size set of the integers `0..n`, one bit each.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    /// The empty set of `0..n`.
    pub fn new(n: usize) -> Self {
        BitSet {
            words: vec![0; n.div_ceil(64)],
        }
    }

    /// The full set `0..n`.
    pub fn full(n: usize) -> Self {
        let mut s = BitSet {
            words: vec![u64::MAX; n.div_ceil(64)],
        };
        if n % 64 != 0 {
            if let Some(last) = s.words.last_mut() {
                *last = (1u64 << (n % 64)) - 1;
            }
        }
        s
    }

    /// Adds `i`; true if it was not there.
    pub fn insert(&mut self, i: usize) -> bool {
        let (w, b) = (i / 64, 1u64 << (i % 64));
        let was = self.words[w] & b != 0;
        self.words[w] |= b;
        !was
    }

    /// Removes `i`.
    pub fn remove(&mut self, i: usize) {
        self.words[i / 64] &= !(1u64 << (i % 64));
    }

    /// True when `i` is in the set.
    pub fn contains(&self, i: usize) -> bool {
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    /// Keeps only what is also in `other`; true if anything was removed.
    pub fn intersect_with(&mut self, other: &BitSet) -> bool {
        intersect_words(&mut self.words, &other.words)
    }

    /// Adds everything in `other`; true if anything was added.
    pub fn union_with(&mut self, other: &BitSet) -> bool {
        union_words(&mut self.words, &other.words)
    }

    /// The words, 64 members each.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The words, 64 members each.
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// The members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &bits)| {
            let mut rest = bits;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let b = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                Some(w * 64 + b)
            })
        })
    }
}

/// `a &= b` word by word; true if `a` changed.
pub(crate) fn intersect_words(a: &mut [u64], b: &[u64]) -> bool {
    let mut changed = false;
    for (x, y) in a.iter_mut().zip(b) {
        let v = *x & y;
        changed |= v != *x;
        *x = v;
    }
    changed
}

/// `a |= b` word by word; true if `a` changed.
pub(crate) fn union_words(a: &mut [u64], b: &[u64]) -> bool {
    let mut changed = false;
    for (x, y) in a.iter_mut().zip(b) {
        let v = *x | y;
        changed |= v != *x;
        *x = v;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_iter_and_ops() {
        let s = BitSet::full(70);
        assert_eq!(s.iter().count(), 70);
        assert!(!s.contains(70));
        let mut a = BitSet::new(130);
        a.insert(3);
        a.insert(129);
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![3, 129]);
        let mut b = BitSet::new(130);
        b.insert(129);
        assert!(a.intersect_with(&b));
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![129]);
        assert!(!a.union_with(&b));
        a.remove(129);
        assert!(!a.contains(129));
    }
}
