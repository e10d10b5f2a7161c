//! Rust types that can live in a buffer.

use half::{bf16, f16};
use hologram_isa::Type;

/// An element type of [`crate::Buffer`]: plain data with an ISA type.
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The matching ISA type.
    const TYPE: Type;
}

macro_rules! element {
    ($($t:ty => $ty:ident),*) => {$(
        impl Element for $t {
            const TYPE: Type = Type::$ty;
        }
    )*};
}

element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64,
         f16 => F16, bf16 => BF16, f32 => F32, f64 => F64);
