// Row-wise softmax of a rows x cols f32 matrix: one workgroup of 256 invocations per row, each
// striding over the columns; the row maximum and the sum of exponentials are reduced in
// workgroup memory. Rows are dispatched over a 2D grid (at most 65535 per dimension).

struct Params {
    rows: u32,
    cols: u32,
    groups_x: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

const WG: u32 = 256u;
var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wg.y * params.groups_x + wg.x;
    // Every invocation of a workgroup takes the same branch: the barriers below stay uniform.
    if (row >= params.rows) {
        return;
    }
    let base = row * params.cols;

    var m = -3.402823e+38;
    for (var c = lid; c < params.cols; c += WG) {
        m = max(m, x[base + c]);
    }
    partial[lid] = m;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            partial[lid] = max(partial[lid], partial[lid + s]);
        }
        workgroupBarrier();
    }
    let row_max = partial[0];
    workgroupBarrier();

    var sum = 0.0;
    for (var c = lid; c < params.cols; c += WG) {
        sum += exp(x[base + c] - row_max);
    }
    partial[lid] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            partial[lid] += partial[lid + s];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / partial[0];

    for (var c = lid; c < params.cols; c += WG) {
        out[base + c] = exp(x[base + c] - row_max) * inv;
    }
}
