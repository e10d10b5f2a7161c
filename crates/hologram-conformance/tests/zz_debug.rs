use hologram_backends::wgpu::codegen::{generate, CodegenOptions};
#[test]
fn dump() {
    let path = std::env::var("HASM").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let k = hologram_isa::assemble(&text).unwrap();
    let c = hologram_compiler::Canonical::new(&k).unwrap();
    println!("{}", hologram_isa::print(&c.kernel().to_program()));
    let block: Vec<u32> = std::env::var("BLOCK")
        .unwrap_or("64,1,1".into())
        .split(',')
        .map(|v| v.parse().unwrap())
        .collect();
    let opts = CodegenOptions {
        block: [block[0], block[1], block[2]],
        bounds_checks: true,
        int64: true,
        float64: true,
        int64_atomics: true,
        max_storage_buffers: 64,
    };
    let g = generate(c.kernel(), &opts).unwrap();
    println!("{}", g.wgsl);
}
#[test]
fn cross() {
    let dir = std::env::var("SUITE").unwrap();
    let suite = hologram_conformance::Suite::load(&dir).unwrap();
    let gpu = hologram_backends::WgpuBackend::with_options(
        &hologram_backends::wgpu::adapter::AdapterOptions {
            api: hologram_backends::wgpu::adapter::Api::Vulkan,
            allow_software: true,
        },
    )
    .unwrap();
    let cpu = hologram_backends::CpuBackend::new();
    for case in &suite.cases {
        for (name, b) in [
            ("cpu", &cpu as &dyn hologram_backends::Backend),
            ("gpu", &gpu),
        ] {
            let c = b.compile(&case.canonical).unwrap();
            let out = b.allocate(64).unwrap();
            b.copy_in(&out, 0, &[0u8; 64]).unwrap();
            let mut args = vec![hologram_backends::KernelArg::Buffer(
                hologram_backends::BufferArg::whole(out.clone()),
            )];
            for p in &case.kernel.params[1..] {
                let v = case.spec["args"][&p.name]["scalar"].clone();
                args.push(hologram_backends::KernelArg::Scalar(
                    hologram_conformance::data::element(p.ty(), &v).unwrap(),
                ));
            }
            b.launch(&c, &hologram_backends::LaunchConfig::linear(1, 1), &args)
                .unwrap();
            b.synchronize().unwrap();
            let mut o = vec![0u8; 64];
            b.copy_out(&out, 0, &mut o).unwrap();
            let v: Vec<i32> = o
                .chunks(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            println!("{} {name}: {:?}", case.name, &v[..8]);
        }
    }
}
