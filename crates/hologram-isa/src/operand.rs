//! Operands: registers, parameters, immediates and special registers.

use std::fmt;
use std::hash::{Hash, Hasher};

/// An immediate (literal) operand. Its type is the type of the instruction that uses it.
///
/// Floats are stored as `f64` and compared by their bits, so a program with NaN immediates still
/// compares equal to itself and hashes consistently.
#[derive(Debug, Clone, Copy)]
pub enum Imm {
    /// An integer literal; the validator checks it fits the instruction's type.
    Int(i128),
    /// A floating-point literal; rounded to the instruction's float type.
    Float(f64),
}

impl PartialEq for Imm {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Imm::Int(a), Imm::Int(b)) => a == b,
            (Imm::Float(a), Imm::Float(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for Imm {}

impl Hash for Imm {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            Imm::Int(v) => {
                0u8.hash(state);
                v.hash(state)
            }
            Imm::Float(v) => {
                1u8.hash(state);
                v.to_bits().hash(state)
            }
        }
    }
}

impl fmt::Display for Imm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Imm::Int(v) => write!(f, "{v}"),
            Imm::Float(v) => {
                if v.is_nan() {
                    if v.to_bits() == f64::NAN.to_bits() {
                        f.write_str("nan")
                    } else if v.to_bits() == (-f64::NAN).to_bits() {
                        f.write_str("-nan")
                    } else {
                        write!(f, "0d{:016x}", v.to_bits())
                    }
                } else if v.is_infinite() {
                    f.write_str(if v > 0.0 { "inf" } else { "-inf" })
                } else {
                    // `{:?}` is the shortest text that parses back to the same bits, and it always
                    // carries a `.` or an exponent, so it never reads back as an integer.
                    let text = format!("{v:?}");
                    f.write_str(&text)
                }
            }
        }
    }
}

/// Axis of a three-dimensional launch index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum Dim {
    X,
    Y,
    Z,
}

impl Dim {
    /// The three axes in order.
    pub const ALL: [Dim; 3] = [Dim::X, Dim::Y, Dim::Z];

    /// 0 for x, 1 for y, 2 for z.
    pub fn index(self) -> usize {
        self as usize
    }

    fn suffix(self) -> &'static str {
        match self {
            Dim::X => "x",
            Dim::Y => "y",
            Dim::Z => "z",
        }
    }
}

/// A special (read-only, `u32`) register describing where a lane sits in the launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Special {
    /// `%tid.x`: the lane's index within its block.
    Tid(Dim),
    /// `%ntid.x`: the block's size.
    Ntid(Dim),
    /// `%ctaid.x`: the block's index within the grid.
    Ctaid(Dim),
    /// `%nctaid.x`: the grid's size in blocks.
    Nctaid(Dim),
    /// `%gid.x`: `ctaid * ntid + tid` along one axis.
    Gid(Dim),
    /// `%gid`: the global linear id, `gid.x + gid.y * W + gid.z * W * H` where `W` and `H` are
    /// the launch's width and height in lanes (`nctaid.x * ntid.x`, `nctaid.y * ntid.y`): x
    /// fastest, then y, then z, over the whole launch (see [`linear_gid`]).
    GidLinear,
}

/// The value of `%gid` for the lane at global position `gid` (`%gid.x|y|z`) of a launch of
/// `grid` blocks of `block` lanes: `gid.x + gid.y * W + gid.z * W * H` with `W = grid.x *
/// block.x` and `H = grid.y * block.y`, in wrapping 32-bit arithmetic (as every backend computes
/// it). A 1-D block (`block.y == block.z == 1`) gives `block_index * block.x + tid.x`, where the
/// block index also counts x fastest.
pub fn linear_gid(gid: [u32; 3], grid: [u32; 3], block: [u32; 3]) -> u32 {
    let width = grid[0].wrapping_mul(block[0]);
    let plane = width.wrapping_mul(grid[1].wrapping_mul(block[1]));
    gid[0]
        .wrapping_add(gid[1].wrapping_mul(width))
        .wrapping_add(gid[2].wrapping_mul(plane))
}

impl Special {
    /// Every special register.
    pub fn all() -> Vec<Special> {
        let mut v = Vec::new();
        for d in Dim::ALL {
            v.extend([
                Special::Tid(d),
                Special::Ntid(d),
                Special::Ctaid(d),
                Special::Nctaid(d),
                Special::Gid(d),
            ]);
        }
        v.push(Special::GidLinear);
        v
    }

    /// The name without its `%` sigil (`tid.x`, `gid`).
    pub fn name(self) -> String {
        let (base, dim) = match self {
            Special::Tid(d) => ("tid", d),
            Special::Ntid(d) => ("ntid", d),
            Special::Ctaid(d) => ("ctaid", d),
            Special::Nctaid(d) => ("nctaid", d),
            Special::Gid(d) => ("gid", d),
            Special::GidLinear => return "gid".to_string(),
        };
        format!("{base}.{}", dim.suffix())
    }

    /// Parses a name without its `%` sigil.
    pub fn from_name(name: &str) -> Option<Special> {
        if name == "gid" {
            return Some(Special::GidLinear);
        }
        let (base, axis) = name.split_once('.')?;
        let d = Dim::ALL.into_iter().find(|d| d.suffix() == axis)?;
        Some(match base {
            "tid" => Special::Tid(d),
            "ntid" => Special::Ntid(d),
            "ctaid" => Special::Ctaid(d),
            "nctaid" => Special::Nctaid(d),
            "gid" => Special::Gid(d),
            _ => return None,
        })
    }

    /// True when the name (without `%`) is reserved for a special register, or is the base of one
    /// (`tid`, `ntid`, ...), so it cannot name a general register.
    pub fn is_reserved(name: &str) -> bool {
        matches!(name, "tid" | "ntid" | "ctaid" | "nctaid" | "gid")
            || Special::from_name(name).is_some()
    }

    /// True when the value differs between the lanes of one block.
    pub fn varies_within_block(self) -> bool {
        matches!(self, Special::Tid(_) | Special::Gid(_) | Special::GidLinear)
    }
}

impl fmt::Display for Special {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.name())
    }
}

/// A source operand. `I` names things: `String` in a [`crate::Program`], `u32` indices in a
/// validated [`crate::Kernel`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Operand<I> {
    /// A general register (`%a`).
    Reg(I),
    /// A scalar kernel parameter (`n`, `alpha`).
    Param(I),
    /// A literal.
    Imm(Imm),
    /// A special register (`%tid.x`).
    Special(Special),
}

impl<I> Operand<I> {
    /// Maps register names with `reg` and parameter names with `param`.
    pub fn map2<J>(
        &self,
        reg: &mut impl FnMut(&I) -> J,
        param: &mut impl FnMut(&I) -> J,
    ) -> Operand<J> {
        match self {
            Operand::Reg(r) => Operand::Reg(reg(r)),
            Operand::Param(p) => Operand::Param(param(p)),
            Operand::Imm(i) => Operand::Imm(*i),
            Operand::Special(s) => Operand::Special(*s),
        }
    }

    /// The register, if this operand is one.
    pub fn as_reg(&self) -> Option<&I> {
        match self {
            Operand::Reg(r) => Some(r),
            _ => None,
        }
    }
}

impl<I> Mem<I> {
    /// Maps the array name with `array` and the index operand's names with `reg` and `param`.
    pub fn map2<J>(
        &self,
        reg: &mut impl FnMut(&I) -> J,
        param: &mut impl FnMut(&I) -> J,
        array: &mut impl FnMut(&I) -> J,
    ) -> Mem<J> {
        Mem {
            array: array(&self.array),
            index: self.index.map2(reg, param),
        }
    }
}

/// An element of an array: a buffer parameter, a `.shared` array or a `.scratch` array, indexed
/// by an integer operand (`x[%i]`, `tile[3]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mem<I> {
    /// The array's name (or index, once validated).
    pub array: I,
    /// The element index, any integer type.
    pub index: Operand<I>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_names_round_trip() {
        for s in Special::all() {
            assert_eq!(Special::from_name(&s.name()), Some(s));
        }
        assert_eq!(Special::GidLinear.to_string(), "%gid");
        assert!(Special::is_reserved("tid"));
        assert!(!Special::is_reserved("i"));
    }

    #[test]
    fn linear_gid_counts_x_fastest_over_the_whole_launch() {
        // grid 2x2, block 4x4: the lane at global (4, 0) is the fifth of the first row.
        assert_eq!(linear_gid([4, 0, 0], [2, 2, 1], [4, 4, 1]), 4);
        assert_eq!(linear_gid([0, 1, 0], [2, 2, 1], [4, 4, 1]), 8);
        assert_eq!(linear_gid([7, 7, 0], [2, 2, 1], [4, 4, 1]), 63);
        assert_eq!(
            linear_gid([1, 2, 3], [2, 3, 2], [4, 2, 3]),
            1 + 2 * 8 + 3 * 48
        );
    }

    #[test]
    fn imm_display() {
        assert_eq!(Imm::Float(1.0).to_string(), "1.0");
        assert_eq!(Imm::Float(f64::NAN).to_string(), "nan");
        assert_eq!(Imm::Float(f64::NEG_INFINITY).to_string(), "-inf");
        assert_eq!(
            Imm::Float(f64::from_bits(0x7ff8000000000001)).to_string(),
            "0d7ff8000000000001"
        );
        assert_eq!(Imm::Int(-5).to_string(), "-5");
        assert_eq!(Imm::Float(1e300).to_string(), "1e300");
    }
}
