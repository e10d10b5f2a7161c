//! The kernel cache: compiled modules in memory, and CUBINs on disk under the cache directory
//! (`$HOLOGRAM_CACHE_DIR`, else the user cache directory, e.g. `~/.cache/hologram`, then
//! `cuda/`), keyed by [`hologram_compiler::cache_key`] of the kernel and a target string that
//! names the backend, the device architecture, the code generator's version, its options and
//! NVRTC's version. A process that finds every kernel on disk runs NVRTC zero times.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hologram_compiler::Digest;

use super::module::Module;
use super::stats::{count, count_code_bytes, Event};
use crate::error::Result;

/// File header: magic, then the payload length (u64 little-endian), then the CUBIN.
const MAGIC: &[u8; 8] = b"HGCUBIN1";

/// The cache directory for CUDA binaries: `$HOLOGRAM_CACHE_DIR/cuda`, else
/// `<user cache dir>/hologram/cuda`; `None` when neither is known or `HOLOGRAM_CACHE_DIR` is
/// `off`.
pub fn cache_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("HOLOGRAM_CACHE_DIR") {
        Some(v) if v == "off" => return None,
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => dirs::cache_dir()?.join("hologram"),
    };
    Some(base.join("cuda"))
}

/// Compiled modules by cache key, backed by the disk cache.
pub(crate) struct ModuleCache {
    loaded: Mutex<HashMap<Digest, Arc<Module>>>,
    dir: Option<PathBuf>,
}

impl ModuleCache {
    pub(crate) fn new() -> Self {
        ModuleCache {
            loaded: Mutex::new(HashMap::new()),
            dir: cache_dir(),
        }
    }

    /// The module for `key`: from memory, else from disk, else `build()` (NVRTC) then stored.
    /// `load` turns a CUBIN into a module; a disk entry that fails to load is rebuilt.
    pub(crate) fn get(
        &self,
        key: Digest,
        build: impl FnOnce() -> Result<Vec<u8>>,
        load: impl Fn(&[u8]) -> Result<Module>,
    ) -> Result<Arc<Module>> {
        if let Some(m) = self.lock().get(&key) {
            count(Event::MemoryHit);
            return Ok(m.clone());
        }
        let path = self.dir.as_ref().map(|d| d.join(format!("{key}.cubin")));
        if let Some(image) = path.as_deref().and_then(read_entry) {
            match load(&image) {
                Ok(m) => {
                    count(Event::DiskHit);
                    count_code_bytes(image.len());
                    return Ok(self.insert(key, m));
                }
                Err(e) => {
                    tracing::warn!(%key, error = %e, "cached CUDA binary did not load; recompiling")
                }
            }
        }
        let image = build()?;
        count(Event::NvrtcCompile);
        let module = load(&image)?;
        count_code_bytes(image.len());
        if let Some(p) = &path {
            match write_entry(p, &image) {
                Ok(()) => count(Event::DiskWrite),
                Err(e) => {
                    tracing::warn!(path = %p.display(), error = %e, "could not write the CUDA kernel cache")
                }
            }
        }
        Ok(self.insert(key, module))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Digest, Arc<Module>>> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, key: Digest, m: Module) -> Arc<Module> {
        // Two threads may build the same kernel at once; the first insert wins.
        self.lock()
            .entry(key)
            .or_insert_with(|| Arc::new(m))
            .clone()
    }
}

fn read_entry(path: &Path) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    let body = bytes.strip_prefix(MAGIC.as_slice())?;
    let (len, image) = body.split_at_checked(8)?;
    let len = u64::from_le_bytes(len.try_into().ok()?);
    (len == image.len() as u64 && len > 0).then(|| image.to_vec())
}

/// Writes atomically: a temporary file in the same directory, then a rename.
fn write_entry(path: &Path, image: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id()
    ));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(MAGIC)?;
        f.write_all(&(image.len() as u64).to_le_bytes())?;
        f.write_all(image)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_reject_truncation() {
        let dir =
            std::env::temp_dir().join(format!("hologram-cuda-cache-test-{}", std::process::id()));
        let p = dir.join("k.cubin");
        write_entry(&p, b"\x7fELF payload").expect("written");
        assert_eq!(read_entry(&p).as_deref(), Some(&b"\x7fELF payload"[..]));
        let mut bytes = std::fs::read(&p).expect("read");
        bytes.pop();
        std::fs::write(&p, &bytes).expect("truncated");
        assert_eq!(read_entry(&p), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
