//! Where a short wgpu submission's round trip goes, on the first Vulkan (or other) adapter,
//! with wgpu alone (no Hologram code): an empty submission, one tiny dispatch, a dispatch plus
//! a mapped read-back, and the cost of a non-blocking poll. Each variant: median and minimum
//! of 200 runs, in microseconds.
//!
//! ```text
//! cargo run --release -p hologram-backends --features wgpu --example wgpu_latency
//! ```

use std::time::{Duration, Instant};

fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0])
}

fn spin_until_idle(device: &wgpu::Device) -> usize {
    let mut polls = 0;
    loop {
        polls += 1;
        if device
            .poll(wgpu::PollType::Poll)
            .is_ok_and(|s| s.is_queue_empty())
        {
            return polls;
        }
        std::hint::spin_loop();
    }
}

fn main() {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::VULKAN);
    desc.flags = wgpu::InstanceFlags::empty();
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }));
    let Ok(adapter) = adapter else {
        eprintln!("no adapter");
        return;
    };
    println!("adapter: {:?}", adapter.get_info());
    println!(
        "immediates: {}",
        adapter.features().contains(wgpu::Features::IMMEDIATES)
    );
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: None,
        required_features: wgpu::Features::empty(),
        required_limits: wgpu::Limits::default(),
        experimental_features: wgpu::ExperimentalFeatures::disabled(),
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    }))
    .expect("device");
    let shader = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: None,
        source: wgpu::ShaderSource::Wgsl(
            "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
             @compute @workgroup_size(1) fn main() { x[0] = x[0] + 1.0; }"
                .into(),
        ),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &shader,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let buf = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 256,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 256,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: buf.as_entire_binding(),
        }],
    });
    let pass = |enc: &mut wgpu::CommandEncoder, dispatches: usize| {
        let mut pass = enc.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        for _ in 0..dispatches {
            pass.dispatch_workgroups(1, 1, 1);
        }
    };
    let dispatch = |copy: bool| {
        let mut enc = device.create_command_encoder(&Default::default());
        pass(&mut enc, 1);
        if copy {
            enc.copy_buffer_to_buffer(&buf, 0, &readback, 0, 256);
        }
        enc.finish()
    };
    const N: usize = 200;
    let mut rows: Vec<(String, Vec<f64>)> = Vec::new();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    // Microseconds of each of `n` runs of `f`.
    let timed = |n: usize, f: &mut dyn FnMut()| -> Vec<f64> {
        (0..n)
            .map(|_| {
                let t = Instant::now();
                f();
                us(t.elapsed())
            })
            .collect()
    };
    let wait = |i: wgpu::SubmissionIndex| {
        device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(i),
                timeout: None,
            })
            .unwrap();
    };

    rows.push((
        "empty submit + poll(Wait)".into(),
        timed(N, &mut || wait(queue.submit([]))),
    ));
    rows.push((
        "empty submit + spin poll(Poll)".into(),
        timed(N, &mut || {
            queue.submit([]);
            spin_until_idle(&device);
        }),
    ));

    // One dispatch: encode, submit, spin; and the pieces.
    let (mut total, mut encode, mut submit, mut waited, mut polls) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..N {
        let t0 = Instant::now();
        let cb = dispatch(false);
        let t1 = Instant::now();
        queue.submit([cb]);
        let t2 = Instant::now();
        let n = spin_until_idle(&device);
        let t3 = Instant::now();
        encode.push(us(t1 - t0));
        submit.push(us(t2 - t1));
        waited.push(us(t3 - t2));
        total.push(us(t3 - t0));
        polls.push(n as f64);
    }
    rows.push(("dispatch: total (spin)".into(), total));
    rows.push(("dispatch: encode".into(), encode));
    rows.push(("dispatch: submit".into(), submit));
    rows.push(("dispatch: wait (spin)".into(), waited));
    rows.push(("dispatch: polls during the wait".into(), polls));

    rows.push((
        "dispatch + poll(Wait)".into(),
        timed(N, &mut || wait(queue.submit([dispatch(false)]))),
    ));
    rows.push((
        "dispatch + copy + map + read (spin)".into(),
        timed(N, &mut || {
            queue.submit([dispatch(true)]);
            let slice = readback.slice(..);
            slice.map_async(wgpu::MapMode::Read, |r| r.unwrap());
            spin_until_idle(&device);
            let _ = f32::from_le_bytes(slice.get_mapped_range().unwrap()[..4].try_into().unwrap());
            readback.unmap();
        }),
    ));

    // wgpu submits staged writes as a command buffer of their own before ours; a staging belt
    // copies in our own command buffer instead.
    let args = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 256,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    rows.push((
        "write_buffer(64 B) + dispatch (spin)".into(),
        timed(N, &mut || {
            queue.write_buffer(&args, 0, &[7u8; 64]);
            queue.submit([dispatch(false)]);
            spin_until_idle(&device);
        }),
    ));
    let mut belt = wgpu::util::StagingBelt::new(device.clone(), 1 << 16);
    rows.push((
        "staging belt (64 B) + dispatch (spin)".into(),
        timed(N, &mut || {
            let mut enc = device.create_command_encoder(&Default::default());
            belt.write_buffer(&mut enc, &args, 0, std::num::NonZeroU64::new(64).unwrap())
                .copy_from_slice(&[7u8; 64]);
            pass(&mut enc, 1);
            belt.finish();
            queue.submit([enc.finish()]);
            belt.recall();
            spin_until_idle(&device);
        }),
    ));
    // Error scopes around finishing an encoder (as a checked submission does).
    rows.push((
        "error scopes + dispatch (spin)".into(),
        timed(N, &mut || {
            let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let val = device.push_error_scope(wgpu::ErrorFilter::Validation);
            let cb = dispatch(false);
            let _ = pollster::block_on(val.pop());
            let _ = pollster::block_on(oom.pop());
            queue.submit([cb]);
            spin_until_idle(&device);
        }),
    ));
    rows.push((
        "20 dispatches, one command buffer, spin".into(),
        timed(N / 4, &mut || {
            let mut enc = device.create_command_encoder(&Default::default());
            pass(&mut enc, 20);
            queue.submit([enc.finish()]);
            spin_until_idle(&device);
        }),
    ));
    rows.push((
        "poll(Poll), idle".into(),
        timed(N, &mut || {
            let _ = device.poll(wgpu::PollType::Poll);
        }),
    ));
    rows.push((
        "20 dispatches, one submit, spin".into(),
        timed(N / 4, &mut || {
            let cbs: Vec<_> = (0..20).map(|_| dispatch(false)).collect();
            queue.submit(cbs);
            spin_until_idle(&device);
        }),
    ));

    println!("{:<40} {:>10} {:>10}", "variant", "median", "min");
    for (name, v) in rows {
        let (med, min) = stats(v);
        println!("{name:<40} {med:>10.1} {min:>10.1}");
    }
}
