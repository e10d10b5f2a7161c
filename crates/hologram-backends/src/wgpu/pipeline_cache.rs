//! Compiled pipelines, keyed by `hologram_compiler::cache_key(kernel, target)` where the target
//! names the adapter (name, backend, driver) and the codegen options (block size, bounds checks,
//! 64-bit features). One backend instance owns one device, so the key also identifies the
//! adapter.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hologram_compiler::Digest;

use super::codegen::{CodegenOptions, Generated};

/// A ready compute pipeline and what its launches need.
pub struct Pipeline {
    pub(crate) pipeline: ::wgpu::ComputePipeline,
    pub(crate) layout: ::wgpu::BindGroupLayout,
    pub(crate) generated: Generated,
}

/// Hit and miss counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipelineCacheStats {
    /// Lookups that found a pipeline.
    pub hits: u64,
    /// Lookups that built one.
    pub misses: u64,
    /// Pipelines held.
    pub entries: usize,
    /// Bytes of WGSL compiled.
    pub code_bytes: u64,
}

/// The cache.
#[derive(Default)]
pub struct PipelineCache {
    map: Mutex<HashMap<Digest, Arc<Pipeline>>>,
    stats: Mutex<PipelineCacheStats>,
}

/// The cache key of a kernel with options on an adapter.
pub fn key(digest: &Digest, adapter: &str, opts: &CodegenOptions) -> Digest {
    hologram_compiler::key_of(digest, &format!("wgpu;{adapter};{}", opts.key()))
}

impl PipelineCache {
    /// The pipeline for `key`, building it with `build` on a miss. Errors are not cached.
    pub fn get_or_build<E>(
        &self,
        key: Digest,
        build: impl FnOnce() -> Result<Pipeline, E>,
    ) -> Result<Arc<Pipeline>, E> {
        if let Some(p) = self.map.lock().ok().and_then(|m| m.get(&key).cloned()) {
            if let Ok(mut s) = self.stats.lock() {
                s.hits += 1;
            }
            return Ok(p);
        }
        let p = Arc::new(build()?);
        if let Ok(mut m) = self.map.lock() {
            m.insert(key, p.clone());
            if let Ok(mut s) = self.stats.lock() {
                s.misses += 1;
                s.entries = m.len();
                s.code_bytes += p.generated.wgsl.len() as u64;
            }
        }
        Ok(p)
    }

    /// Hit and miss counts.
    pub fn stats(&self) -> PipelineCacheStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }
}
