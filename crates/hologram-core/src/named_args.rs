//! Binding a kernel's arguments by parameter name: the one binder behind `hologram run` and
//! Python's `Executor.run`. It rejects names bound twice, unknown names (listing the kernel's
//! parameters) and missing ones, and hands each given value to the caller's conversion in
//! parameter order; scalars given as text parse with [`parse_scalar`].

use std::collections::HashMap;

use hologram_isa::semantics::Value;
use hologram_isa::{Kernel, Param, ParamKind, Type};

use crate::error::{Error, Result};
use hologram_backends::KernelArg;

/// The kernel's arguments in parameter order, from `(name, value)` pairs.
///
/// `convert` turns the value given for one parameter into its launch argument (reading a file,
/// uploading a buffer, checking a tensor's dtype, ...); its errors are returned as they are.
///
/// ```
/// use hologram_core::named_args::{bind_by_name, parse_scalar};
/// use hologram_core::KernelArg;
/// use hologram_isa::ParamKind;
///
/// let k = hologram_isa::assemble(".kernel k\n.param .u32 n\n.param .f32 a\n    exit;\n")?;
/// let given = [("a".to_string(), "2.5"), ("n".to_string(), "7")];
/// let args = bind_by_name(&k, given, |p, text| match p.kind {
///     ParamKind::Scalar(ty) => Ok(KernelArg::Scalar(parse_scalar(&p.name, ty, text)?)),
///     ParamKind::Buffer { .. } => unreachable!("no buffers here"),
/// })?;
/// assert_eq!(args.len(), 2);
/// let missing = bind_by_name(&k, [("n".to_string(), "7")], |_, _| {
///     Ok(KernelArg::Scalar(hologram_isa::semantics::Value::U32(7)))
/// });
/// assert!(missing.unwrap_err().to_string().contains("missing an argument for parameter 'a'"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn bind_by_name<V>(
    kernel: &Kernel,
    given: impl IntoIterator<Item = (String, V)>,
    mut convert: impl FnMut(&Param, V) -> Result<KernelArg>,
) -> Result<Vec<KernelArg>> {
    let mut values: HashMap<String, V> = HashMap::new();
    for (name, value) in given {
        if kernel.params.iter().all(|p| p.name != name) {
            let names: Vec<&str> = kernel.params.iter().map(|p| p.name.as_str()).collect();
            return Err(Error::InvalidArgument(format!(
                "kernel '{}' has no parameter '{name}' (it has {})",
                kernel.name,
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        }
        if values.contains_key(&name) {
            return Err(Error::InvalidArgument(format!("'{name}' is bound twice")));
        }
        values.insert(name, value);
    }
    kernel
        .params
        .iter()
        .map(|p| {
            let value = values.remove(&p.name).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "missing an argument for parameter '{}' ({})",
                    p.name,
                    describe(&p.kind)
                ))
            })?;
            convert(p, value)
        })
        .collect()
}

/// A scalar argument given as text: a number in the type's syntax, or `true`/`false` (also
/// Python's `True`/`False`) for predicates.
pub fn parse_scalar(name: &str, ty: Type, text: &str) -> Result<Value> {
    let text = text.trim();
    let text = match text {
        "True" => "true",
        "False" => "false",
        t => t,
    };
    Value::parse(ty, text).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "'{text}' is not a valid {ty} for parameter '{name}'"
        ))
    })
}

fn describe(kind: &ParamKind) -> String {
    match kind {
        ParamKind::Scalar(ty) => format!("a {ty} scalar"),
        ParamKind::Buffer { elem, .. } => format!("a buffer of {elem}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel() -> Kernel {
        hologram_isa::assemble(".kernel k\n.param .buf.f32 x .rw\n.param .u32 n\n    exit;\n")
            .unwrap()
    }

    fn scalars_only(p: &Param, text: &str) -> Result<KernelArg> {
        match p.kind {
            ParamKind::Scalar(ty) => Ok(KernelArg::Scalar(parse_scalar(&p.name, ty, text)?)),
            ParamKind::Buffer { .. } => Err(Error::InvalidArgument("buffer".into())),
        }
    }

    #[test]
    fn unknown_twice_and_missing_names_are_errors() {
        let k = kernel();
        let e = bind_by_name(&k, [("y".to_string(), "1")], scalars_only).unwrap_err();
        assert!(
            e.to_string().contains("has no parameter 'y' (it has x, n)"),
            "{e}"
        );
        let twice = [("n".to_string(), "1"), ("n".to_string(), "2")];
        let e = bind_by_name(&k, twice, scalars_only).unwrap_err();
        assert!(e.to_string().contains("'n' is bound twice"), "{e}");
        let e = bind_by_name(&k, [("n".to_string(), "1")], scalars_only).unwrap_err();
        assert!(
            e.to_string()
                .contains("missing an argument for parameter 'x' (a buffer of f32)"),
            "{e}"
        );
    }

    #[test]
    fn values_come_back_in_parameter_order() {
        let k = hologram_isa::assemble(".kernel k\n.param .u32 a\n.param .pred b\n    exit;\n")
            .unwrap();
        let given = [("b".to_string(), "True"), ("a".to_string(), " 7 ")];
        let args = bind_by_name(&k, given, scalars_only).unwrap();
        assert!(matches!(args[0], KernelArg::Scalar(Value::U32(7))));
        assert!(matches!(args[1], KernelArg::Scalar(Value::Pred(true))));
        let e = parse_scalar("a", Type::F32, "two").unwrap_err();
        assert!(e.to_string().contains("'two' is not a valid f32"), "{e}");
    }
}
