//! The folds of the library reduction templates as WGSL statements, written from
//! [`Combine`] (the twin of `Combine::fold` and the block template's arg tree fold in
//! `hologram_compiler::patterns::reduce_templates`), with the same expressions the generic
//! code gives those instructions, so the dedicated kernels round exactly as the generic ones.

use hologram_compiler::patterns::reduce_templates::Combine;
use hologram_isa::{BinaryOp, CmpOp, Type};

use super::inst::{binary, compare};

/// Statements folding value `x` into `acc` (both of type `t`); for arg reductions `index` is
/// `(accumulator index, x's index)`. Max and min propagate NaN; ties keep the accumulator.
pub(crate) fn fold(
    c: Combine,
    t: Type,
    acc: &str,
    x: &str,
    index: Option<(&str, &str)>,
    float64: bool,
) -> String {
    match c {
        Combine::Sum => format!("{acc} = {};", binary(BinaryOp::Add, t, acc, x, float64)),
        Combine::Prod => format!("{acc} = {};", binary(BinaryOp::Mul, t, acc, x, float64)),
        Combine::Max | Combine::Min | Combine::ArgMax | Combine::ArgMin => {
            let cmp = if matches!(c, Combine::Max | Combine::ArgMax) {
                CmpOp::Gt
            } else {
                CmpOp::Lt
            };
            let mut s = format!("{{ var hd_better = {};", compare(cmp, t, x, acc));
            if t.is_float() {
                // x is NaN and acc is not: take x.
                s.push_str(&format!(
                    " hd_better = hd_better || ({} && {});",
                    compare(CmpOp::Ne, t, x, x),
                    compare(CmpOp::Eq, t, acc, acc)
                ));
            }
            s.push_str(&format!(" {acc} = select({acc}, {x}, hd_better);"));
            if let Some((aix, ix)) = index.filter(|_| c.is_arg()) {
                s.push_str(&format!(" {aix} = select({aix}, {ix}, hd_better);"));
            }
            s.push_str(" }");
            s
        }
    }
}

/// Statements combining two partial arg results (`mine` at index `mix`, `other` at `oix`): the
/// better value wins; equal values (or two NaNs) keep the smaller index.
pub(crate) fn arg_tree_fold(
    c: Combine,
    t: Type,
    (mine, mix): (&str, &str),
    (other, oix): (&str, &str),
) -> String {
    let cmp = if c == Combine::ArgMax {
        CmpOp::Gt
    } else {
        CmpOp::Lt
    };
    let mut s = format!(
        "{{ var hd_bt = {}; let hd_lower = {oix} < {mix}; let hd_tie = {} && hd_lower;",
        compare(cmp, t, other, mine),
        compare(CmpOp::Eq, t, other, mine)
    );
    if t.is_float() {
        s.push_str(&format!(
            " let hd_on = {}; let hd_mn = {}; let hd_both = hd_mn && hd_on && hd_lower; hd_bt = ((hd_bt || hd_on) && !hd_mn) || hd_both;",
            compare(CmpOp::Ne, t, other, other),
            compare(CmpOp::Ne, t, mine, mine)
        ));
    }
    s.push_str(&format!(
        " hd_bt = hd_bt || hd_tie; {mine} = select({mine}, {other}, hd_bt); {mix} = select({mix}, {oix}, hd_bt); }}"
    ));
    s
}
