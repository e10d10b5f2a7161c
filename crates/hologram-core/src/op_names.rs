//! The one table of op names: what Python (`hologram._native`, `hologram.Tensor`,
//! `hologram_torch`) and any other front end calls each element-wise function and reduction.
//! Rust code calls the `Tensor` methods (`recip`, `bitand`, ...); text goes through here.
//!
//! ```
//! use hologram_core::{BinaryFn, ReduceOp, UnaryFn};
//!
//! assert_eq!(UnaryFn::from_name("reciprocal"), Some(UnaryFn::Recip));
//! assert_eq!(UnaryFn::from_name("not"), Some(UnaryFn::Not)); // an alias
//! assert_eq!(UnaryFn::Not.name(), "logical_not");
//! assert_eq!(BinaryFn::from_name("minimum"), Some(BinaryFn::Min));
//! assert_eq!(ReduceOp::from_name("argmax"), Some(ReduceOp::ArgMax));
//! assert!(UnaryFn::ALL.iter().all(|f| UnaryFn::from_name(f.name()) == Some(*f)));
//! ```

use crate::ops::ReduceOp;
use crate::tensor::{BinaryFn, UnaryFn};

/// `name()`, `from_name()` (the name or an alias) and `ALL` for an enum of ops.
macro_rules! op_names {
    ($ty:ident { $($variant:ident => $name:literal $(| $alias:literal)*),* $(,)? }) => {
        impl $ty {
            /// Every member, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),*];

            /// The name front ends use (Python's `hologram._native`, error messages).
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),*
                }
            }

            /// The member a name (or an alias such as `not`) stands for.
            pub fn from_name(name: &str) -> Option<$ty> {
                match name {
                    $($name $(| $alias)* => Some($ty::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

op_names!(UnaryFn {
    Abs => "abs", Neg => "neg", Sqrt => "sqrt", Rsqrt => "rsqrt", Exp => "exp", Log => "log",
    Sin => "sin", Cos => "cos", Tan => "tan", Tanh => "tanh", Sigmoid => "sigmoid",
    Relu => "relu", Gelu => "gelu", Silu => "silu", Erf => "erf", Floor => "floor",
    Ceil => "ceil", Round => "round", Trunc => "trunc", Not => "logical_not" | "not",
    Recip => "reciprocal" | "recip", Square => "square",
});

op_names!(BinaryFn {
    Add => "add", Sub => "sub", Mul => "mul", Div => "div", Rem => "rem", Pow => "pow",
    Min => "minimum", Max => "maximum", And => "and" | "bitand", Or => "or" | "bitor",
    Xor => "xor" | "bitxor",
});

op_names!(ReduceOp {
    Sum => "sum", Mean => "mean", Prod => "prod", Max => "max", Min => "min",
    ArgMax => "argmax", ArgMin => "argmin",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        fn check<T: Copy + PartialEq + std::fmt::Debug>(
            all: &[T],
            name: fn(T) -> &'static str,
            from: fn(&str) -> Option<T>,
        ) {
            let mut seen = std::collections::HashSet::new();
            for &op in all {
                assert_eq!(from(name(op)), Some(op));
                assert!(seen.insert(name(op)), "{} named twice", name(op));
            }
        }
        check(UnaryFn::ALL, UnaryFn::name, UnaryFn::from_name);
        check(BinaryFn::ALL, BinaryFn::name, BinaryFn::from_name);
        check(ReduceOp::ALL, ReduceOp::name, ReduceOp::from_name);
        assert_eq!(UnaryFn::ALL.len(), 22);
        assert_eq!(BinaryFn::from_name("nope"), None);
    }
}
