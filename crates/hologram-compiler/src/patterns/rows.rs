//! Recognizing the fused row kernels: a kernel is one when its canonical form equals one of the
//! templates of [`super::softmax_templates`] (up to the names of the kernel, its parameters and
//! arrays).

use hologram_isa::{ArrayRef, Kernel, Op, ParamKind, Type};

use super::row_gen::PARTIALS;
use super::softmax_templates::{row_acc, row_program, RowOp, ROW_BLOCK, ROW_UNROLL};
use super::{structural_text, template_structure, TemplateCache};

/// A recognized row kernel: the template's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowPattern {
    /// What it computes.
    pub op: RowOp,
    /// Element type of the inputs and the output.
    pub storage: Type,
    /// Lanes per row.
    pub g: u32,
    /// Elements per lane kept in registers (0: every pass reads the row).
    pub resident: u32,
}

impl RowPattern {
    /// The compute type (f32 for the 16-bit types).
    pub fn acc(&self) -> Type {
        row_acc(self.storage)
    }
}

fn template_text(p: &RowPattern) -> Option<String> {
    static CACHE: TemplateCache<RowPattern> = TemplateCache::new();
    template_structure(&CACHE, p, || row_program(p.op, p.storage, p.g, p.resident))
}

/// Recognizes a fused row kernel.
pub fn recognize_rows(k: &Kernel) -> Option<RowPattern> {
    // Cheap checks first: the template's parameters and its shared arrays.
    let buffers: Vec<Type> = k
        .params
        .iter()
        .filter_map(|p| match p.kind {
            ParamKind::Buffer { elem, .. } => Some(elem),
            ParamKind::Scalar(_) => None,
        })
        .collect();
    let scalars = k.params.len() - buffers.len();
    let storage = *buffers.first()?;
    let ops: &[RowOp] = match (buffers.len(), scalars) {
        (2, 3) => &[RowOp::Softmax, RowOp::LogSoftmax],
        (2, 4) => &[RowOp::AttentionSoftmax],
        (2, 5) => &[RowOp::CausalAttentionSoftmax],
        (3, 4) => &[RowOp::SoftmaxBackward, RowOp::LogSoftmaxBackward],
        (3, 5) => &[RowOp::AttentionSoftmaxBackward],
        _ => return None,
    };
    let acc = row_acc(storage);
    // The group reduction's two shared arrays: one slot per lane, then the partials.
    let shared_ok = k.shared.len() == 2
        && k.shared.iter().all(|s| s.elem == acc)
        && k.shared[0].len == ROW_BLOCK
        && k.shared[1].len == ROW_BLOCK / 32 * PARTIALS
        && buffers.iter().all(|&b| b == storage);
    if !shared_ok || !storage.is_float() {
        return None;
    }
    // The last pass stores once per resident element, or once per unrolled element and once
    // in the tail loop when rows are read per pass.
    let global_stores = k
        .insts
        .iter()
        .filter(|i| matches!(&i.op, Op::St { mem, .. } if matches!(k.array(mem.array), ArrayRef::Param(_))))
        .count() as u32;
    let mut residents = vec![global_stores];
    if global_stores == ROW_UNROLL + 1 {
        residents.push(0);
    }
    let mine = structural_text(k);
    for &op in ops {
        for g in [32, 64, 128, 256] {
            for &resident in &residents {
                let p = RowPattern {
                    op,
                    storage,
                    g,
                    resident,
                };
                if template_text(&p).as_deref() == Some(mine.as_str()) {
                    return Some(p);
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
    fn every_template_is_recognized_as_itself() {
        for op in RowOp::ALL {
            for storage in [Type::F32, Type::F64, Type::F16, Type::BF16] {
                for g in [32, 128, 256] {
                    for resident in [0, 1, 8, 9, 16] {
                        let k = hologram_isa::assemble(&hologram_isa::print(&row_program(
                            op, storage, g, resident,
                        )))
                        .unwrap();
                        let want = RowPattern {
                            op,
                            storage,
                            g,
                            resident,
                        };
                        assert_eq!(recognize_rows(&k), Some(want));
                    }
                }
            }
        }
    }

    #[test]
    fn a_changed_template_is_not_recognized() {
        let text = hologram_isa::print(&row_program(RowOp::Softmax, Type::F32, 128, 8))
            .replace("exp.f32", "exp2.f32");
        let k = hologram_isa::assemble(&text).unwrap();
        assert_eq!(recognize_rows(&k), None);
        let other =
            hologram_isa::assemble(".kernel k\n.param .buf.f32 y .rw\n    st.f32 y[%gid], 1.0;\n")
                .unwrap();
        assert_eq!(recognize_rows(&other), None);
    }
}
