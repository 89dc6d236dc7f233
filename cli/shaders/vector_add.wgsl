// out = x + y over n f32 elements, one element per invocation: the vector add a wgpu user
// writes. Dispatched as a 2D grid of workgroups because one dimension holds at most 65535.

struct Params {
    n: u32,
    // Workgroups along x, to turn the 2D grid back into a flat index.
    groups_x: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = (wg.y * params.groups_x + wg.x) * 256u + lid;
    if (i < params.n) {
        out[i] = x[i] + y[i];
    }
}
