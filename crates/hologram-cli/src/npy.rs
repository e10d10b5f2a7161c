//! Reading and writing NumPy `.npy` files (little-endian, C order).

use std::io::{Read, Write};
use std::path::Path;

use hologram_isa::Type;

use crate::error::CliError;

/// The NumPy dtype string of an ISA type (bf16 has none).
pub fn descr(ty: Type) -> Option<&'static str> {
    Some(match ty {
        Type::I8 => "|i1",
        Type::I16 => "<i2",
        Type::I32 => "<i4",
        Type::I64 => "<i8",
        Type::U8 => "|u1",
        Type::U16 => "<u2",
        Type::U32 => "<u4",
        Type::U64 => "<u8",
        Type::F16 => "<f2",
        Type::F32 => "<f4",
        Type::F64 => "<f8",
        Type::BF16 | Type::Pred => return None,
    })
}

fn type_of(descr: &str) -> Option<Type> {
    let d = descr.replace('=', "<");
    [
        Type::I8,
        Type::I16,
        Type::I32,
        Type::I64,
        Type::U8,
        Type::U16,
        Type::U32,
        Type::U64,
        Type::F16,
        Type::F32,
        Type::F64,
    ]
    .into_iter()
    .find(|&t| {
        self::descr(t).is_some_and(|s| s == d || (s.starts_with('|') && d.get(1..) == s.get(1..)))
    })
}

/// An array read from a `.npy` file: its element type and raw little-endian bytes (C order;
/// the shape is flattened).
pub struct NpyArray {
    /// Element type.
    pub ty: Type,
    /// Raw bytes.
    pub data: Vec<u8>,
}

fn header_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let start = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[start..].trim_start().strip_prefix(':')?.trim_start();
    Some(rest)
}

/// Reads a `.npy` file.
pub fn read(path: &Path) -> Result<NpyArray, CliError> {
    let bad = |why: &str| CliError::Npy(format!("{}: {why}", path.display()));
    let mut f =
        std::fs::File::open(path).map_err(|e| CliError::Io(path.display().to_string(), e))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)
        .map_err(|e| CliError::Io(path.display().to_string(), e))?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy file"));
    }
    let (hlen, hstart) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(&format!("unsupported .npy version {v}"))),
    };
    let header = bytes
        .get(hstart..hstart + hlen)
        .ok_or_else(|| bad("truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("header is not text"))?;
    let descr_text = header_value(header, "descr").ok_or_else(|| bad("no 'descr' in header"))?;
    let descr = descr_text
        .trim_start_matches('\'')
        .split('\'')
        .next()
        .unwrap_or("");
    let ty = type_of(descr).ok_or_else(|| bad(&format!("unsupported dtype '{descr}'")))?;
    if header_value(header, "fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err(bad(
            "Fortran-order arrays are not supported; save with np.ascontiguousarray",
        ));
    }
    let shape_text = header_value(header, "shape").ok_or_else(|| bad("no 'shape' in header"))?;
    let inner = shape_text
        .trim_start_matches('(')
        .split(')')
        .next()
        .unwrap_or("");
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad("malformed shape"))?;
    let count: usize = shape.iter().product();
    let data = bytes[hstart + hlen..].to_vec();
    if data.len() != count * ty.size_bytes() {
        return Err(bad(&format!(
            "expected {count} elements of {ty}, found {} bytes",
            data.len()
        )));
    }
    Ok(NpyArray { ty, data })
}

/// Writes a 1-D `.npy` file.
pub fn write(path: &Path, ty: Type, data: &[u8]) -> Result<(), CliError> {
    let descr = descr(ty).ok_or_else(|| {
        CliError::Npy(format!(
            "{ty} has no NumPy dtype; cannot write {}",
            path.display()
        ))
    })?;
    let count = data.len() / ty.size_bytes();
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({count},), }}");
    // Pad so the data starts on a 64-byte boundary, as NumPy does.
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    let mut f =
        std::fs::File::create(path).map_err(|e| CliError::Io(path.display().to_string(), e))?;
    f.write_all(&out)
        .map_err(|e| CliError::Io(path.display().to_string(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let data: Vec<u8> = bytemuck::cast_slice(&[1.5f32, -2.0, 3.25]).to_vec();
        write(&p, Type::F32, &data).unwrap();
        let a = read(&p).unwrap();
        assert_eq!((a.ty, a.data), (Type::F32, data));
        assert!(write(&p, Type::BF16, &[0, 0]).is_err());
    }
}
