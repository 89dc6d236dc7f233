//! Baselines: the hand-written WGSL shaders in `shaders/` (vector add, softmax, tiled matmul),
//! compiled the normal way a wgpu user's shaders are (naga translates WGSL to SPIR-V, with its
//! bounds checks) and run on the wgpu devices the suite measures. Each is checked against the
//! same f64 reference as tilekit's kernels before it is timed with the same protocol (device
//! timestamps around each dispatch, the same cache flush, the same run counts).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use sha2::{Digest, Sha256};
use tilekit_spirv::WgpuRuntime;

use super::runner::{blank, BenchOptions};
use super::schema::{CheckRecord, Entry, OutputRecord, Status};
use super::stats::{runs_needed, summarize};
use crate::check::compare;
use crate::device::Device;
use crate::kernels::{Kernel, Problem};
use crate::{DType, HostBuffer};

pub const VECTOR_ADD: &str = include_str!("../../shaders/vector_add.wgsl");
pub const SOFTMAX: &str = include_str!("../../shaders/softmax.wgsl");
pub const MATMUL: &str = include_str!("../../shaders/matmul.wgsl");

/// A shader and how to launch it on a problem.
struct Job {
    file: &'static str,
    source: &'static str,
    /// Little-endian u32 parameters, in the shader's `Params` order.
    params: Vec<u32>,
    groups: [u32; 3],
    out_dtype: DType,
    out_len: usize,
    needs_f16: bool,
}

/// Splits `n` workgroups over x and y, as one dimension holds at most 65535.
fn grid_2d(n: usize) -> [u32; 3] {
    let x = n.clamp(1, 65535);
    [x as u32, n.div_ceil(x).max(1) as u32, 1]
}

/// The baseline shader for a problem, when `shaders/` has one.
fn job(kernel: &str, p: &Problem) -> Option<Job> {
    if !p.opts.is_empty() {
        return None;
    }
    match (kernel, p.dtype, &p.shape[..]) {
        ("vector_add", DType::F32, &[n]) => {
            let g = grid_2d(n.div_ceil(256));
            Some(Job {
                file: "vector_add.wgsl",
                source: VECTOR_ADD,
                params: vec![n as u32, g[0]],
                groups: g,
                out_dtype: DType::F32,
                out_len: n,
                needs_f16: false,
            })
        }
        ("softmax", DType::F32, &[rows, cols]) => {
            let g = grid_2d(rows);
            Some(Job {
                file: "softmax.wgsl",
                source: SOFTMAX,
                params: vec![rows as u32, cols as u32, g[0]],
                groups: g,
                out_dtype: DType::F32,
                out_len: rows * cols,
                needs_f16: false,
            })
        }
        ("matmul", DType::F16, &[m, n, k]) => Some(Job {
            file: "matmul.wgsl",
            source: MATMUL,
            params: vec![m as u32, n as u32, k as u32],
            groups: [n.div_ceil(64) as u32, m.div_ceil(64) as u32, 1],
            out_dtype: DType::F16,
            out_len: m * n,
            needs_f16: true,
        }),
        _ => None,
    }
}

/// One wgpu device per adapter for the baselines, opened once.
fn runtime(name: &str) -> Result<Arc<WgpuRuntime>, String> {
    static RUNTIMES: OnceLock<Mutex<HashMap<String, Arc<WgpuRuntime>>>> = OnceLock::new();
    let mut map = RUNTIMES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(rt) = map.get(name) {
        return Ok(rt.clone());
    }
    let rt = Arc::new(WgpuRuntime::with_adapter(Some(name)).map_err(|e| e.to_string())?);
    map.insert(name.to_string(), rt.clone());
    Ok(rt)
}

/// Runs `f` inside a validation and an out-of-memory error scope; what they caught becomes
/// an error naming `op`.
fn scoped<T>(device: &wgpu::Device, op: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let out = f();
    let errors = [pollster::block_on(validation.pop()), pollster::block_on(oom.pop())];
    match errors.into_iter().flatten().next() {
        None => Ok(out),
        Some(e) => Err(format!("{op}: {e}")),
    }
}

fn wait(device: &wgpu::Device, index: wgpu::SubmissionIndex) -> Result<(), String> {
    device.poll(wgpu::PollType::Wait { submission_index: Some(index), timeout: None }).map(|_| ()).map_err(|e| format!("waiting for the device: {e}"))
}

/// A loaded baseline: pipeline, buffers and bind group.
struct Loaded {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    out: tilekit_spirv::WgpuBuffer,
}

fn load(rt: &WgpuRuntime, job: &Job, inputs: &[HostBuffer]) -> Result<Loaded, String> {
    let device = rt.device();
    let module = scoped(device, &format!("compiling shaders/{}", job.file), || {
        device.create_shader_module(wgpu::ShaderModuleDescriptor { label: Some(job.file), source: wgpu::ShaderSource::Wgsl(job.source.into()) })
    })?;
    let pipeline = scoped(device, &format!("building the pipeline of shaders/{}", job.file), || {
        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(job.file),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        })
    })?;
    let bufs = inputs.iter().map(|b| rt.alloc_from(b)).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    let out = rt.alloc(job.out_dtype, job.out_len).map_err(|e| e.to_string())?;
    // Poison the output (NaN bits), so an element the shader does not write fails the check.
    let poison = HostBuffer::zeros(job.out_dtype, job.out_len);
    poison.fill_bits(if job.out_dtype.size_bytes() == 2 { 0x7E01 } else { 0x7FC0_0001 });
    rt.upload(&out, &poison).map_err(|e| e.to_string())?;
    let bytes: Vec<u8> = job.params.iter().flat_map(|p| p.to_le_bytes()).chain(std::iter::repeat(0)).take(16).collect();
    let params = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("baseline params"),
        size: 16,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    rt.queue().write_buffer(&params, 0, &bytes);
    let mut entries: Vec<wgpu::BindGroupEntry> =
        bufs.iter().enumerate().map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.buffer.as_entire_binding() }).collect();
    entries.push(wgpu::BindGroupEntry { binding: bufs.len() as u32, resource: out.buffer.as_entire_binding() });
    entries.push(wgpu::BindGroupEntry { binding: bufs.len() as u32 + 1, resource: params.as_entire_binding() });
    let bind_group = scoped(device, &format!("binding the buffers of shaders/{}", job.file), || {
        device.create_bind_group(&wgpu::BindGroupDescriptor { label: Some(job.file), layout: &pipeline.get_bind_group_layout(0), entries: &entries })
    })?;
    Ok(Loaded { pipeline, bind_group, out })
}

/// Encodes one dispatch, between timestamps when `query` is given.
fn dispatch(enc: &mut wgpu::CommandEncoder, l: &Loaded, groups: [u32; 3], query: Option<&wgpu::QuerySet>) {
    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
        label: Some("baseline"),
        timestamp_writes: query.map(|q| wgpu::ComputePassTimestampWrites {
            query_set: q,
            beginning_of_pass_write_index: Some(0),
            end_of_pass_write_index: Some(1),
        }),
    });
    pass.set_pipeline(&l.pipeline);
    pass.set_bind_group(0, &l.bind_group, &[]);
    pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
}

/// Device time of `runs` dispatches after `warmup`, each after its own cache flush.
fn time(rt: &WgpuRuntime, l: &Loaded, groups: [u32; 3], warmup: usize, runs: usize, flush: &[tilekit_spirv::WgpuBuffer]) -> Result<Vec<f64>, String> {
    let device = rt.device();
    let queue = rt.queue();
    let op = "timing a baseline";
    if warmup > 0 {
        let mut enc = device.create_command_encoder(&Default::default());
        for _ in 0..warmup {
            dispatch(&mut enc, l, groups, None);
        }
        wait(device, queue.submit([enc.finish()]))?;
    }
    let query = scoped(device, op, || {
        device.create_query_set(&wgpu::QuerySetDescriptor { label: Some("baseline timestamps"), ty: wgpu::QueryType::Timestamp, count: 2 })
    })?;
    let resolve = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("baseline resolve"),
        size: 16,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let bytes = 16 * runs as u64;
    let readback = scoped(device, op, || {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("baseline readback"),
            size: bytes.max(16),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    })?;
    for i in 0..runs as u64 {
        if !flush.is_empty() {
            let mut enc = device.create_command_encoder(&Default::default());
            for f in flush {
                enc.clear_buffer(&f.buffer, 0, None);
            }
            wait(device, queue.submit([enc.finish()]))?;
        }
        let index = scoped(device, op, || {
            let mut enc = device.create_command_encoder(&Default::default());
            dispatch(&mut enc, l, groups, Some(&query));
            enc.resolve_query_set(&query, 0..2, &resolve, 0);
            enc.copy_buffer_to_buffer(&resolve, 0, &readback, 16 * i, 16);
            queue.submit([enc.finish()])
        })?;
        wait(device, index)?;
    }
    let slice = readback.slice(..bytes.max(16));
    let (tx, rx) = std::sync::mpsc::channel();
    slice.map_async(wgpu::MapMode::Read, move |r| {
        let _ = tx.send(r);
    });
    device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| format!("{op}: {e}"))?;
    rx.recv().map_err(|e| format!("{op}: {e}"))?.map_err(|e| format!("{op}: mapping timestamps: {e}"))?;
    let period = queue.get_timestamp_period() as f64 * 1e-9;
    let samples = {
        let data = slice.get_mapped_range().map_err(|e| format!("{op}: {e}"))?;
        data.chunks_exact(16)
            .take(runs)
            .map(|c| {
                let begin = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
                let end = u64::from_le_bytes(c[8..].try_into().expect("8 bytes"));
                end.wrapping_sub(begin) as f64 * period
            })
            .collect()
    };
    readback.unmap();
    Ok(samples)
}

/// Checks and times the baseline of `kernel` on `problem` on a wgpu device; `None` when
/// `shaders/` has no baseline for it (or the device is not a wgpu one).
pub fn baseline(
    device: &Device,
    kernel: &dyn Kernel,
    problem: &Problem,
    reference: Option<&Vec<Vec<f64>>>,
    inputs: &[HostBuffer],
    o: &BenchOptions,
    run: &str,
) -> Option<Entry> {
    let Device::Wgpu { name, .. } = device else { return None };
    let job = job(kernel.name(), problem)?;
    let cost = kernel.cost(problem);
    let mut e = blank(run, &device.name(), kernel.name(), "wgsl", problem, format!("shaders/{}", job.file), true, cost.bytes, cost.flops);
    e.status = Status::Error;
    e.kernel_hash = Some(Sha256::digest(job.source.as_bytes()).iter().map(|b| format!("{b:02x}")).collect());
    let Some(reference) = reference else {
        e.status = Status::Skipped;
        e.message = Some("no reference to check against".into());
        return Some(e);
    };
    let result = (|| -> Result<(), String> {
        let rt = runtime(name)?;
        if job.needs_f16 && !rt.device().features().contains(wgpu::Features::SHADER_F16) {
            return Err(format!("shaders/{} needs wgpu's SHADER_F16, which {name} lacks", job.file));
        }
        let start = Instant::now();
        let l = load(&rt, &job, inputs)?;
        e.compile_s = Some(start.elapsed().as_secs_f64());
        let start = Instant::now();
        let mut enc = rt.device().create_command_encoder(&Default::default());
        dispatch(&mut enc, &l, job.groups, None);
        wait(rt.device(), rt.queue().submit([enc.finish()]))?;
        let out = rt.download(&l.out, job.out_dtype, job.out_len).map_err(|err| err.to_string())?;
        e.first_run_s = Some(start.elapsed().as_secs_f64());
        let c = compare("out", &out.to_f64(), &reference[0], kernel.tolerance(problem));
        let pass = c.pass;
        e.check = Some(CheckRecord {
            outputs: vec![OutputRecord { name: c.name, rel_err: c.rel_err, tolerance: c.tolerance, non_finite: c.non_finite, pass: c.pass }],
        });
        if !pass {
            e.status = Status::Wrong;
            e.message = Some("the output failed its tolerance against the f64 reference; not timed".into());
            return Ok(());
        }
        let chunk = (rt.limits().max_buffer_size & !3).clamp(4, 256 << 20);
        let mut flush = Vec::new();
        let mut left = o.flush_bytes.div_ceil(4) * 4;
        while left > 0 {
            let n = left.min(chunk);
            flush.push(rt.alloc(DType::U32, (n / 4) as usize).map_err(|err| err.to_string())?);
            left -= n;
        }
        let first = o.min_runs.min(o.max_runs).max(1);
        let mut samples = time(&rt, &l, job.groups, o.warmup, first, &flush)?;
        let want = runs_needed(samples.len(), samples.iter().sum(), o.min_runs, o.min_time_s, o.max_runs);
        if want > samples.len() {
            samples.extend(time(&rt, &l, job.groups, 0, want - samples.len(), &flush)?);
        }
        e.summary = summarize(&samples);
        e.samples_s = samples;
        if e.summary.is_some() {
            e.status = Status::Ok;
        } else {
            e.message = Some("the timer returned a sample that is not finite".into());
        }
        Ok(())
    })();
    if let Err(m) = result {
        e.status = Status::Error;
        e.message = Some(m);
    }
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shader_parses_and_validates_in_naga() {
        for (name, src) in [("vector_add", VECTOR_ADD), ("softmax", SOFTMAX), ("matmul", MATMUL)] {
            let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("shaders/{name}.wgsl: {e}"));
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::all())
                .validate(&module)
                .unwrap_or_else(|e| panic!("shaders/{name}.wgsl: {e:?}"));
        }
    }

    #[test]
    fn baselines_cover_the_suite_kernels_and_no_others() {
        assert!(job("vector_add", &Problem::new(&[1000], DType::F32)).is_some());
        assert!(job("vector_add", &Problem::new(&[1000], DType::F16)).is_none());
        assert!(job("softmax", &Problem::new(&[3, 1000], DType::F32)).is_some());
        let m = job("matmul", &Problem::new(&[100, 70, 33], DType::F16)).unwrap();
        assert_eq!(m.groups, [2, 2, 1]);
        assert!(job("matmul", &Problem::new(&[100, 70, 33], DType::F16).with("bias", "1")).is_none());
        assert!(job("layernorm", &Problem::new(&[4, 8], DType::F16)).is_none());
        // 2^28 elements in workgroups of 256 need a second grid dimension.
        let g = job("vector_add", &Problem::new(&[1 << 28], DType::F32)).unwrap().groups;
        assert!(g[0] <= 65535 && g[0] as usize * g[1] as usize * 256 >= 1 << 28);
    }
}
