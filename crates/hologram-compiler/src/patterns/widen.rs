//! Narrow storage types (f16, bf16) computed in a wider accumulator: the conversions every
//! generated kernel writes around its loads and its store.

use hologram_isa::{ProgramBuilder, Special, Type};

/// The register holding `loaded` (a `storage` value) as an `acc` value: `loaded` itself when
/// the types agree, else `widened` after a `cvt`.
pub fn widen<'a>(
    b: &mut ProgramBuilder,
    acc: Type,
    storage: Type,
    loaded: &'a str,
    widened: &'a str,
) -> &'a str {
    if storage == acc {
        loaded
    } else {
        b.cvt(acc, storage, widened, loaded);
        widened
    }
}

/// Stores `value` (an `acc` register) into `array[%gid]` as `storage`, narrowing it through
/// `%out` when the types differ.
pub fn store_at_gid(b: &mut ProgramBuilder, storage: Type, acc: Type, array: &str, value: &str) {
    if storage == acc {
        b.st(storage, array, Special::GidLinear, value);
    } else {
        b.cvt(storage, acc, "%out", value);
        b.st(storage, array, Special::GidLinear, "%out");
    }
}
