//! Device properties a test can require (`"requires": [...]` in its spec).
//!
//! Some ISA rules are ones a target language lets devices break and no portable kernel can
//! enforce: WGSL lets devices flush `f32` subnormals to zero (NVIDIA's Vulkan driver does). The
//! suite keeps such cases in separate programs that name the property; on a device without it
//! they are reported as unsupported (with the reason) instead of failing, and every other case
//! still has to pass.

use hologram_backends::Backend;
use serde_json::Value as Json;

/// The properties a spec may name.
pub const KNOWN: &[&str] = &["f32_subnormals"];

/// Why `backend` cannot run a test with this spec, or `None` when it has everything the spec
/// requires. A malformed `requires` or an unknown property is an error.
pub fn missing(spec: &Json, backend: &dyn Backend) -> Result<Option<String>, String> {
    let Some(list) = spec.get("requires") else {
        return Ok(None);
    };
    let list = list
        .as_array()
        .ok_or("\"requires\" must be a list of strings")?;
    for item in list {
        let name = item
            .as_str()
            .ok_or("\"requires\" must be a list of strings")?;
        match name {
            "f32_subnormals" if backend.flushes_f32_subnormals() => {
                return Ok(Some(
                    "this device flushes f32 subnormals to zero (WGSL permits it)".into(),
                ))
            }
            "f32_subnormals" => {}
            other => {
                return Err(format!(
                    "unknown requirement '{other}' (known: {})",
                    KNOWN.join(", ")
                ))
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hologram_backends::CpuBackend;

    #[test]
    fn cpu_keeps_subnormals_and_unknown_names_are_errors() {
        let cpu = CpuBackend::new();
        let spec: Json = serde_json::json!({"requires": ["f32_subnormals"]});
        assert_eq!(missing(&spec, &cpu), Ok(None));
        assert_eq!(missing(&serde_json::json!({}), &cpu), Ok(None));
        let bad: Json = serde_json::json!({"requires": ["warp_size_32"]});
        assert!(missing(&bad, &cpu).is_err());
        let bad: Json = serde_json::json!({"requires": "f32_subnormals"});
        assert!(missing(&bad, &cpu).is_err());
    }
}
