//! Recognizing reductions: a kernel is a library reduction when its canonical form equals one
//! of the reduction templates (up to the names of the kernel, its parameters and arrays).

use hologram_isa::{Kernel, ParamKind, Type};

use super::reduce_templates::{self, Combine};
use super::{structural_text, template_structure, TemplateCache};

/// Which template a reduction matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// One lane per output: params `(x, out, off, rlen, inner, n)`.
    Lane,
    /// One block of [`super::reduce_templates::BLOCK`] lanes per (row, chunk): params
    /// `(x, [xix,] out, [outix,] off, rlen, chunks, clen)`.
    Block {
        /// The partial results' indexes come in `xix` (second stage of arg reductions).
        index_input: bool,
    },
}

/// A recognized reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReducePattern {
    /// The template.
    pub kind: ReduceKind,
    /// What it computes.
    pub combine: Combine,
    /// Element type of the input.
    pub storage: Type,
    /// Accumulator type.
    pub acc: Type,
    /// Element type of the result (for arg reductions, the value type of the partials).
    pub out: Type,
}

fn template_text(p: &ReducePattern) -> Option<String> {
    static CACHE: TemplateCache<ReducePattern> = TemplateCache::new();
    template_structure(&CACHE, p, || reduce_templates::program(p))
}

fn buffer_types(k: &Kernel) -> Vec<Option<Type>> {
    k.params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Buffer { elem, .. } => Some(elem),
            ParamKind::Scalar(_) => None,
        })
        .collect()
}

/// Recognizes a reduction template in a kernel.
pub fn recognize_reduce(k: &Kernel) -> Option<ReducePattern> {
    let bufs = buffer_types(k);
    let nbuf = bufs.iter().filter(|b| b.is_some()).count();
    let scalars_u32 = k
        .params
        .iter()
        .filter(|p| p.kind == ParamKind::Scalar(Type::U32))
        .count();
    if scalars_u32 != 4 || nbuf + 4 != k.params.len() || !(2..=4).contains(&nbuf) {
        return None;
    }
    let storage = bufs[0]?;
    let out_ty = bufs[1 + usize::from(
        nbuf == 4 || (nbuf == 3 && bufs[1] == Some(Type::U32) && !k.shared.is_empty()),
    )]?;
    let kinds: Vec<ReduceKind> = if k.shared.is_empty() {
        vec![ReduceKind::Lane]
    } else {
        vec![
            ReduceKind::Block { index_input: false },
            ReduceKind::Block { index_input: true },
        ]
    };
    let mine = structural_text(k);
    let accs = [storage, Type::F32, Type::F64, Type::I64, Type::U64];
    for kind in kinds {
        for combine in Combine::ALL {
            for acc in accs {
                let outs: &[Type] = if combine.is_arg() { &[acc] } else { &[out_ty] };
                for &out in outs {
                    let p = ReducePattern {
                        kind,
                        combine,
                        storage,
                        acc,
                        out,
                    };
                    if template_text(&p).as_deref() == Some(mine.as_str()) {
                        return Some(p);
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_recognized() {
        for (c, s, a, o) in [
            (Combine::Sum, Type::F32, Type::F32, Type::F32),
            (Combine::Sum, Type::F16, Type::F32, Type::F16),
            (Combine::Max, Type::I32, Type::I32, Type::I32),
            (Combine::ArgMax, Type::F32, Type::F32, Type::F32),
            (Combine::Sum, Type::U8, Type::I64, Type::I64),
        ] {
            // Written out as text, as a user would: recognized from the canonical form.
            let text = |p| hologram_isa::print(&p);
            let lane =
                hologram_isa::assemble(&text(reduce_templates::lane_program(c, s, a, o))).unwrap();
            let got = recognize_reduce(&lane).unwrap();
            assert_eq!(
                (got.kind, got.combine, got.storage, got.acc),
                (ReduceKind::Lane, c, s, a)
            );
            let block =
                hologram_isa::assemble(&text(reduce_templates::block_program(c, s, a, o, false)))
                    .unwrap();
            let got = recognize_reduce(&block).unwrap();
            assert_eq!(
                (got.kind, got.combine, got.acc),
                (ReduceKind::Block { index_input: false }, c, a)
            );
        }
        let other =
            hologram_isa::assemble(".kernel k\n.param .buf.f32 y .rw\n    st.f32 y[%gid], 1.0;\n")
                .unwrap();
        assert!(recognize_reduce(&other).is_none());
    }
}
