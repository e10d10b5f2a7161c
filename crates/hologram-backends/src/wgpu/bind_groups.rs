//! Bind groups kept between launches, keyed by the pipeline and the buffers bound.
//!
//! A launch binds its error slot and its argument words at dynamic offsets of two buffers that
//! live as long as the device (see `work_queue.rs`), and each buffer parameter as its whole
//! allocation (offsets and lengths are argument words), so a kernel launched again on the same
//! allocations (the caching allocator hands the same ones back) reuses its bind group instead of
//! creating one per launch. A bind group keeps its buffers alive, so an allocation that is
//! freed drops the groups naming it (`WgpuMemory`'s `Drop` calls [`BindGroupCache::forget`]).

use std::collections::HashMap;
use std::sync::Mutex;

/// Groups kept at most; past it the cache starts over (launch patterns that create this many
/// distinct groups gain little from caching).
const MAX_GROUPS: usize = 1024;

#[derive(PartialEq, Eq, Hash)]
struct GroupKey {
    /// The address of the pipeline (pipelines stay in their cache for the device's lifetime,
    /// so an address names one pipeline).
    pipeline: usize,
    /// The buffers bound, in binding order.
    buffers: Vec<::wgpu::Buffer>,
}

/// The cache of one device.
#[derive(Default)]
pub(crate) struct BindGroupCache {
    groups: Mutex<HashMap<GroupKey, ::wgpu::BindGroup>>,
}

impl BindGroupCache {
    /// The group binding `buffers` for the pipeline at `pipeline`, made by `create` on a miss.
    pub fn get_or_create(
        &self,
        pipeline: usize,
        buffers: Vec<::wgpu::Buffer>,
        create: impl FnOnce() -> ::wgpu::BindGroup,
    ) -> ::wgpu::BindGroup {
        let key = GroupKey { pipeline, buffers };
        if let Some(g) = self.groups.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return g;
        }
        let group = create();
        if let Ok(mut m) = self.groups.lock() {
            if m.len() >= MAX_GROUPS {
                m.clear();
            }
            m.insert(key, group.clone());
        }
        group
    }

    /// Drops every group that binds `buffer` (its allocation is being freed).
    pub fn forget(&self, buffer: &::wgpu::Buffer) {
        if let Ok(mut m) = self.groups.lock() {
            m.retain(|k, _| !k.buffers.contains(buffer));
        }
    }

    /// Groups held (for tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.groups.lock().map(|m| m.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use crate::backend::{Backend, BufferArg, KernelArg, LaunchConfig};
    use crate::wgpu::adapter::{AdapterOptions, Api};
    use crate::WgpuBackend;

    const FILL: &str =
        ".kernel fill\n.param .buf.u32 y .rw\n.param .buf.u32 x\n    ld.u32 %v, x[%gid];\n    st.u32 y[%gid], %v;\n";

    #[test]
    fn groups_are_reused_and_dropped_with_their_buffers() {
        let opts = AdapterOptions {
            api: Api::Vulkan,
            allow_software: true,
        };
        let b = match WgpuBackend::with_options(&opts) {
            Ok(b) => b,
            Err(e) => {
                // Without any Vulkan adapter there is nothing to cache.
                eprintln!("skipped: {e}");
                return;
            }
        };
        let k = b
            .compile(&hologram_compiler::Canonical::assemble(FILL).expect("assemble"))
            .expect("compile");
        let groups = b.gpu.groups.clone();
        let before = groups.len();
        let (x, y, z) = (
            b.allocate(256).expect("allocate"),
            b.allocate(256).expect("allocate"),
            b.allocate(256).expect("allocate"),
        );
        let launch = |out: &crate::backend::Memory| {
            let args = [
                KernelArg::Buffer(BufferArg::whole(out.clone())),
                KernelArg::Buffer(BufferArg::whole(x.clone())),
            ];
            b.launch(&k, &LaunchConfig::linear(1, 64), &args)
                .expect("launch");
        };
        launch(&y);
        launch(&y);
        assert_eq!(
            groups.len(),
            before + 1,
            "the second launch reuses the group"
        );
        launch(&z);
        assert_eq!(groups.len(), before + 2);
        b.synchronize().expect("synchronize");
        drop(z);
        assert_eq!(groups.len(), before + 1, "freeing z drops its group");
        drop(x);
        assert_eq!(groups.len(), before, "freeing x drops the group naming it");
    }
}
