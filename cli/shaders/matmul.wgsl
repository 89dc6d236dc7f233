// C = A B for row-major f16 matrices (A: M x K, B: K x N, C: M x N), accumulated in f32: the
// tiled matmul a wgpu user writes. Each workgroup of 16 x 16 invocations computes a 64 x 64
// tile of C, each invocation a 4 x 4 block of it, staging 64 x 16 tiles of A and 16 x 64 tiles
// of B through workgroup memory. Edges are guarded, so any M, N, K work.

enable f16;

struct Params {
    m: u32,
    n: u32,
    k: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f16>;
@group(0) @binding(1) var<storage, read> b: array<f16>;
@group(0) @binding(2) var<storage, read_write> c: array<f16>;
@group(0) @binding(3) var<uniform> params: Params;

const TM: u32 = 64u;
const TN: u32 = 64u;
const TK: u32 = 16u;

var<workgroup> a_tile: array<array<f32, 16>, 64>;
var<workgroup> b_tile: array<array<f32, 64>, 16>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = wg.y * TM;
    let col0 = wg.x * TN;
    let flat = lid.y * 16u + lid.x;
    var acc: array<array<f32, 4>, 4>;
    for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) {
            acc[i][j] = 0.0;
        }
    }
    for (var k0 = 0u; k0 < params.k; k0 += TK) {
        // 1024 elements per tile, 256 invocations: 4 loads each.
        for (var l = 0u; l < 4u; l++) {
            let e = flat + l * 256u;
            let ar = e / TK;
            let ac = e % TK;
            let gr = row0 + ar;
            let gk = k0 + ac;
            var av = 0.0;
            if (gr < params.m && gk < params.k) {
                av = f32(a[gr * params.k + gk]);
            }
            a_tile[ar][ac] = av;
            let br = e / TN;
            let bc = e % TN;
            let bk = k0 + br;
            let gc = col0 + bc;
            var bv = 0.0;
            if (bk < params.k && gc < params.n) {
                bv = f32(b[bk * params.n + gc]);
            }
            b_tile[br][bc] = bv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk++) {
            var av: array<f32, 4>;
            var bv: array<f32, 4>;
            for (var i = 0u; i < 4u; i++) {
                av[i] = a_tile[lid.y * 4u + i][kk];
                bv[i] = b_tile[kk][lid.x * 4u + i];
            }
            for (var i = 0u; i < 4u; i++) {
                for (var j = 0u; j < 4u; j++) {
                    acc[i][j] += av[i] * bv[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let r = row0 + lid.y * 4u + i;
        for (var j = 0u; j < 4u; j++) {
            let cc = col0 + lid.x * 4u + j;
            if (r < params.m && cc < params.n) {
                c[r * params.n + cc] = f16(acc[i][j]);
            }
        }
    }
}
