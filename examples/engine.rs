//! An engine's frame with tilekit kernels in it: a wgpu application renders a dim scene, then,
//! in the same command encoder and on buffers the renderer owns, two tilekit kernels build the
//! scene's luminance histogram and its prefix sum, and a second render pass equalises the
//! scene through that cumulative histogram. One submission; nothing goes through the host
//! until the finished frame is read back to be checked (and written as a PPM image).
//!
//! `cargo run --release --example engine [--naga] [OUT.ppm]` (runs headless, on lavapipe too).
//! With `--naga` the engine's device is opened without passthrough, on any wgpu backend
//! (Vulkan, Metal, DX12, GL), and the kernels reach it as naga modules
//! ([`Device::from_wgpu_naga`]).

use std::borrow::Cow;

use tilekit::{Access, Args, Builder, Config, DType, Device, DeviceBuffer, Kernel, Program};

/// The frame's side in pixels.
pub const SIZE: u32 = 256;
/// Luminance bins of the histogram (luminance 0..=255, four values a bin).
pub const BINS: usize = 64;
const BLOCK: i64 = 1024;

/// Luminance of a pixel's bytes, 0..=255 (BT.601 weights in 8-bit fixed point); the kernel,
/// the equalising shader and [`reference`] compute it alike.
pub fn luminance(r: u32, g: u32, b: u32) -> u32 {
    (77 * r + 150 * g + 29 * b) >> 8
}

/// `hist[luminance(pixel) / 4] += 1` for every pixel (RGBA8 packed in a u32, red lowest).
fn histogram_program(_: &Config) -> Result<Program, tilekit::Error> {
    let k = Builder::new("luminance_histogram");
    let pixels = k.input("pixels", DType::U32);
    let hist = k.buffer("hist", DType::I32, Access::ReadWrite);
    let n = k.scalar("n", DType::I32);
    let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
    let mask = offs.lt(n);
    let p = k.load_masked(pixels, offs, mask, 0u32);
    let (r, g, b) = (p & 255u32, (p >> 8u32) & 255u32, (p >> 16u32) & 255u32);
    let lum = (r * 77u32 + g * 150u32 + b * 29u32) >> 8u32;
    let bin = (lum >> 2u32).cast(DType::I32);
    k.atomic_add(hist, bin, 1, Some(mask));
    Ok(k.finish()?)
}

/// `cdf = cumsum(hist)` over the bins, in one program.
fn prefix_sum_program(_: &Config) -> Result<Program, tilekit::Error> {
    let k = Builder::new("prefix_sum");
    let hist = k.input("hist", DType::I32);
    let cdf = k.output("cdf", DType::I32);
    let i = k.arange(0, BINS as i64);
    k.store(cdf, i, k.load(hist, i).cumsum(0));
    Ok(k.finish()?)
}

const SHADERS: &str = r#"
@vertex
fn full_screen(@builtin(vertex_index) i: u32) -> @builtin(position) vec4<f32> {
    let x = f32((i << 1u) & 2u) * 2.0 - 1.0;
    let y = f32(i & 2u) * 2.0 - 1.0;
    return vec4<f32>(x, y, 0.0, 1.0);
}

// A dim, low-contrast scene: most pixels in a narrow band of dark values.
@fragment
fn scene(@builtin(position) p: vec4<f32>) -> @location(0) vec4<f32> {
    let u = p.x / 256.0;
    let v = p.y / 256.0;
    return vec4<f32>(0.10 + 0.15 * u + 0.05 * sin(12.0 * v), 0.12 + 0.10 * v, 0.08 + 0.20 * u * v, 1.0);
}

@group(0) @binding(0) var scene_image: texture_2d<f32>;
@group(0) @binding(1) var<storage, read> cdf: array<i32>;

// Histogram equalisation: each pixel scaled so that its luminance becomes its rank.
@fragment
fn equalise(@builtin(position) p: vec4<f32>) -> @location(0) vec4<f32> {
    let q = vec3<u32>(round(textureLoad(scene_image, vec2<i32>(p.xy), 0).rgb * 255.0));
    let lum = (77u * q.r + 150u * q.g + 29u * q.b) >> 8u;
    let rank = f32(cdf[lum >> 2u]) / f32(cdf[63]) * 255.0;
    let scale = rank / max(f32(lum), 1.0);
    return vec4<f32>(min(vec3<f32>(q) * scale / 255.0, vec3<f32>(1.0)), 1.0);
}
"#;

/// The scene and the equalised frame, RGBA8 each, as the GPU made them.
pub struct Frame {
    pub scene: Vec<u8>,
    pub equalised: Vec<u8>,
    /// The cumulative histogram the kernels built.
    pub cdf: Vec<i32>,
    pub adapter: String,
    /// What tilekit moved through the host while the frame was built and run.
    pub transfers: tilekit::Transfers,
}

/// Renders one frame on the first Vulkan adapter wgpu finds that has what tilekit needs
/// (passthrough SPIR-V); with `naga`, on the first adapter of any backend, the kernels as
/// naga modules.
pub fn render(naga: bool) -> Result<Frame, Box<dyn std::error::Error>> {
    // The engine's own device: tilekit's features requested beside the renderer's.
    let backends = if naga { wgpu::Backends::all() } else { wgpu::Backends::VULKAN };
    let needed = if naga { tilekit::WGPU_NAGA_FEATURES } else { tilekit::WGPU_FEATURES };
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    let instance = wgpu::Instance::new(desc);
    let adapters = pollster::block_on(instance.enumerate_adapters(backends));
    let adapter = adapters
        .into_iter()
        .find(|a| a.features().contains(needed))
        .ok_or("no adapter with the features tilekit needs (install mesa-vulkan-drivers for lavapipe)")?;
    let info = adapter.get_info();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("engine"),
        required_features: needed,
        required_limits: adapter.limits(),
        ..Default::default()
    }))?;
    let target = tilekit::gpu::Target::vulkan_baseline();
    let tk = if naga {
        Device::from_wgpu_naga("engine", device.clone(), queue.clone(), info.clone(), target)?
    } else {
        Device::from_wgpu("engine", device.clone(), queue.clone(), info.clone(), target)?
    };

    let n = (SIZE * SIZE) as usize;
    let texture = |label, usage| {
        device.create_texture(&wgpu::TextureDescriptor {
            label: Some(label),
            size: wgpu::Extent3d { width: SIZE, height: SIZE, depth_or_array_layers: 1 },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: wgpu::TextureFormat::Rgba8Unorm,
            usage,
            view_formats: &[],
        })
    };
    let both = wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC;
    let scene = texture("scene", both | wgpu::TextureUsages::TEXTURE_BINDING);
    let equalised = texture("equalised", both);
    let buffer =
        |label, size: u64, usage| device.create_buffer(&wgpu::BufferDescriptor { label: Some(label), size, usage, mapped_at_creation: false });
    let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC;
    let pixels = buffer("pixels", n as u64 * 4, storage);
    let hist = buffer("hist", BINS as u64 * 4, storage);
    let cdf = buffer("cdf", BINS as u64 * 4, storage);
    let readback = buffer("readback", (2 * n + BINS) as u64 * 4, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);

    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("engine shaders"),
        source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(SHADERS)),
    });
    let pipeline = |entry: &str| {
        device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some(entry),
            layout: None,
            vertex: wgpu::VertexState { module: &module, entry_point: Some("full_screen"), compilation_options: Default::default(), buffers: &[] },
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                targets: &[Some(wgpu::TextureFormat::Rgba8Unorm.into())],
            }),
            primitive: wgpu::PrimitiveState::default(),
            depth_stencil: None,
            multisample: wgpu::MultisampleState::default(),
            multiview_mask: None,
            cache: None,
        })
    };
    let (draw_scene, draw_equalised) = (pipeline("scene"), pipeline("equalise"));
    let scene_view = scene.create_view(&Default::default());
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some("equalise inputs"),
        layout: &draw_equalised.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry { binding: 0, resource: wgpu::BindingResource::TextureView(&scene_view) },
            wgpu::BindGroupEntry { binding: 1, resource: cdf.as_entire_binding() },
        ],
    });
    let pass = |encoder: &mut wgpu::CommandEncoder, target: &wgpu::Texture, pipeline: &wgpu::RenderPipeline, bind: Option<&wgpu::BindGroup>| {
        let view = target.create_view(&Default::default());
        let mut rp = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("frame"),
            color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                view: &view,
                depth_slice: None,
                resolve_target: None,
                ops: wgpu::Operations { load: wgpu::LoadOp::Clear(wgpu::Color::BLACK), store: wgpu::StoreOp::Store },
            })],
            ..Default::default()
        });
        rp.set_pipeline(pipeline);
        if let Some(b) = bind {
            rp.set_bind_group(0, b, &[]);
        }
        rp.draw(0..3, 0..1);
    };
    let to_buffer = |encoder: &mut wgpu::CommandEncoder, from: &wgpu::Texture, to: &wgpu::Buffer, offset: u64| {
        encoder.copy_texture_to_buffer(
            from.as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: to,
                layout: wgpu::TexelCopyBufferLayout { offset, bytes_per_row: Some(SIZE * 4), rows_per_image: None },
            },
            wgpu::Extent3d { width: SIZE, height: SIZE, depth_or_array_layers: 1 },
        );
    };

    // The frame: scene, its pixels into a storage buffer, the two kernels, the equalised pass.
    let histogram = Kernel::new("luminance_histogram", histogram_program);
    let prefix_sum = Kernel::new("prefix_sum", prefix_sum_program);
    let (tk_pixels, tk_hist, tk_cdf) = (
        DeviceBuffer::from_wgpu(&tk, pixels.clone(), DType::U32, n)?,
        DeviceBuffer::from_wgpu(&tk, hist.clone(), DType::I32, BINS)?,
        DeviceBuffer::from_wgpu(&tk, cdf.clone(), DType::I32, BINS)?,
    );
    let config = Config::new().with("num_warps", 4);
    let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("frame") });
    pass(&mut encoder, &scene, &draw_scene, None);
    to_buffer(&mut encoder, &scene, &pixels, 0);
    encoder.clear_buffer(&hist, 0, None);
    let args = Args::new().arg("pixels", &tk_pixels).arg("hist", &tk_hist).scalar("n", n as i32);
    histogram.record(&tk, &mut encoder, [(n as u32).div_ceil(BLOCK as u32), 1, 1], &args, &config)?;
    prefix_sum.record(&tk, &mut encoder, [1, 1, 1], &Args::new().arg("hist", &tk_hist).arg("cdf", &tk_cdf), &config)?;
    pass(&mut encoder, &equalised, &draw_equalised, Some(&bind));
    // Read back only to check the frame.
    to_buffer(&mut encoder, &scene, &readback, 0);
    to_buffer(&mut encoder, &equalised, &readback, n as u64 * 4);
    encoder.copy_buffer_to_buffer(&cdf, 0, &readback, 2 * n as u64 * 4, BINS as u64 * 4);
    queue.submit([encoder.finish()]);
    let transfers = tk.transfers()?;

    let slice = readback.slice(..);
    slice.map_async(wgpu::MapMode::Read, |_| {});
    device.poll(wgpu::PollType::wait_indefinitely())?;
    let bytes = slice.get_mapped_range()?.to_vec();
    readback.unmap();
    let cdf = bytes[2 * n * 4..].chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Ok(Frame { scene: bytes[..n * 4].to_vec(), equalised: bytes[n * 4..2 * n * 4].to_vec(), cdf, adapter: info.name, transfers })
}

/// The equalised frame computed on the host from the scene's bytes: the histogram, its prefix
/// sum and the same shading in f32.
pub fn reference(scene: &[u8]) -> (Vec<i32>, Vec<u8>) {
    let mut hist = vec![0i32; BINS];
    for p in scene.chunks_exact(4) {
        hist[(luminance(p[0] as u32, p[1] as u32, p[2] as u32) >> 2) as usize] += 1;
    }
    let cdf: Vec<i32> = hist
        .iter()
        .scan(0, |s, &h| {
            *s += h;
            Some(*s)
        })
        .collect();
    let mut out = Vec::with_capacity(scene.len());
    for p in scene.chunks_exact(4) {
        let lum = luminance(p[0] as u32, p[1] as u32, p[2] as u32);
        let rank = cdf[(lum >> 2) as usize] as f32 / cdf[BINS - 1] as f32 * 255.0;
        let scale = rank / (lum as f32).max(1.0);
        for &c in &p[..3] {
            out.push(((c as f32 * scale / 255.0).min(1.0) * 255.0).round() as u8);
        }
        out.push(255);
    }
    (cdf, out)
}

/// The largest difference of two RGBA8 images, per channel.
pub fn largest_difference(a: &[u8], b: &[u8]) -> u8 {
    a.iter().zip(b).map(|(&x, &y)| x.abs_diff(y)).max().unwrap_or(0)
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let naga = std::env::args().any(|a| a == "--naga");
    let frame = render(naga)?;
    let (cdf, want) = reference(&frame.scene);
    let diff = largest_difference(&frame.equalised, &want);
    println!(
        "{}: one frame (render, histogram and prefix sum by tilekit, equalise) in one submission; {} pixels, equalised frame within {diff} of the host's",
        frame.adapter,
        frame.cdf[BINS - 1]
    );
    if frame.cdf != cdf || diff > 1 {
        return Err(format!("the frame differs from the host's (histogram equal: {}, largest pixel difference {diff})", frame.cdf == cdf).into());
    }
    if let Some(path) = std::env::args().skip(1).find(|a| a != "--naga") {
        let mut ppm = format!("P6\n{SIZE} {SIZE}\n255\n").into_bytes();
        ppm.extend(frame.equalised.chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]));
        std::fs::write(&path, ppm)?;
        println!("wrote {path}");
    }
    Ok(())
}
