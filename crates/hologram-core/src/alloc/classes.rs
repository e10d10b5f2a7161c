//! The 96 size classes: four per power of two, from 256 B to 3.5 GiB.

/// Number of size classes.
pub const NUM_CLASSES: usize = 96;
/// The smallest class.
pub const MIN_CLASS_BYTES: usize = 256;

/// Size in bytes of class `k` (0..96): `2^(8 + k/4) * (4 + k%4) / 4`, i.e. 256, 320, 384,
/// 448, 512, 640, ... up to 3.5 GiB. Consecutive classes differ by at most 25 %, so a request
/// wastes less than a fifth of its block.
pub const fn class_bytes(k: usize) -> usize {
    let octave = 1usize << (8 + k / 4);
    octave / 4 * (4 + k % 4)
}

/// The smallest class that holds `bytes`, or None when the request is larger than every class
/// (it then goes straight to the device).
pub fn class_for(bytes: usize) -> Option<usize> {
    if bytes <= MIN_CLASS_BYTES {
        return Some(0);
    }
    // The octave is fixed by the highest set bit; search the four classes around it.
    let log2 = usize::BITS - 1 - (bytes - 1).leading_zeros();
    let start = (log2 as usize).saturating_sub(8) * 4;
    (start.saturating_sub(4)..NUM_CLASSES).find(|&k| class_bytes(k) >= bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_geometric() {
        assert_eq!(class_bytes(0), 256);
        assert_eq!(class_bytes(1), 320);
        assert_eq!(class_bytes(4), 512);
        assert_eq!(class_bytes(95), 3 << 30 | 1 << 29);
        for k in 1..NUM_CLASSES {
            let (a, b) = (class_bytes(k - 1), class_bytes(k));
            assert!(b > a && (b as f64) / (a as f64) <= 1.25 + 1e-9, "{k}");
        }
    }

    #[test]
    fn smallest_fitting_class() {
        assert_eq!(class_for(1), Some(0));
        assert_eq!(class_for(256), Some(0));
        assert_eq!(class_for(257), Some(1));
        assert_eq!(class_for(512), Some(4));
        assert_eq!(class_for(513), Some(5));
        assert_eq!(class_for(class_bytes(95)), Some(95));
        assert_eq!(class_for(class_bytes(95) + 1), None);
        for bytes in [1000usize, 4096, 1 << 20, 123_456_789] {
            let k = class_for(bytes).unwrap();
            assert!(class_bytes(k) >= bytes && (k == 0 || class_bytes(k - 1) < bytes));
        }
    }
}
