struct Scalars {
    n_cols: i32,
}

@group(0) @binding(0) 
var<storage> x: array<f32>;
@group(0) @binding(1) 
var<storage, read_write> y: array<f32>;
var<immediate> scalars: Scalars;
var<workgroup> shared_f32_: array<f32, 4>;

@compute @workgroup_size(32, 1, 1) 
fn main(@builtin(local_invocation_index) local_invocation_index: u32, @builtin(workgroup_id) workgroup_id: vec3<u32>, @builtin(num_workgroups) num_workgroups: vec3<u32>) {
    var bits_ff800000_: u32 = 4286578688u;

    let _e28 = bits_ff800000_;
    let _e29 = bitcast<f32>(_e28);
    let _e2 = bitcast<i32>(local_invocation_index);
    let _e13 = scalars.n_cols;
    let _e21 = (_e2 & 7i);
    let _e24 = (_e2 >> u32(3i));
    let _e25 = (bitcast<i32>(workgroup_id.x) * _e13);
    let _e42 = (((_e21 >> u32(0i)) & 7i) + (((_e24 >> u32(0i)) & 3i) * 8i));
    let _e52 = ((0i + _e42) + 0i);
    let _e53 = ((32i + _e42) + 0i);
    let _e54 = ((64i + _e42) + 0i);
    let _e55 = ((96i + _e42) + 0i);
    let _e56 = (_e25 + _e52);
    let _e57 = (_e25 + _e53);
    let _e58 = (_e25 + _e54);
    let _e59 = (_e25 + _e55);
    let _e60 = (_e52 < _e13);
    let _e61 = (_e53 < _e13);
    let _e62 = (_e54 < _e13);
    let _e63 = (_e55 < _e13);
    let _e68 = x[select(0i, _e56, _e60)];
    let _e69 = select(_e29, _e68, _e60);
    let _e74 = x[select(0i, _e57, _e61)];
    let _e75 = select(_e29, _e74, _e61);
    let _e80 = x[select(0i, _e58, _e62)];
    let _e81 = select(_e29, _e80, _e62);
    let _e86 = x[select(0i, _e59, _e63)];
    let _e87 = select(_e29, _e86, _e63);
    let _e100 = (((_e21 >> u32(0i)) & 7i) + (((_e24 >> u32(0i)) & 3i) * 8i));
    let v114_ = ((bitcast<u32>(_e75) & 2147483647u) > 2139095040u);
    let v120_ = ((bitcast<u32>(_e69) & 2147483647u) > 2139095040u);
    let v121_ = select(select(max(_e69, _e75), _e69, v114_), _e75, v120_);
    let v127_ = ((bitcast<u32>(_e81) & 2147483647u) > 2139095040u);
    let v134_ = select(select(max(v121_, _e81), v121_, v127_), _e81, ((bitcast<u32>(v121_) & 2147483647u) > 2139095040u));
    let v140_ = ((bitcast<u32>(_e87) & 2147483647u) > 2139095040u);
    let v147_ = select(select(max(v134_, _e87), v134_, v140_), _e87, ((bitcast<u32>(v134_) & 2147483647u) > 2139095040u));
    let _e149 = subgroupShuffleXor(v147_, 1u);
    let _e162 = select(select(max(v147_, _e149), v147_, ((bitcast<u32>(_e149) & 2147483647u) > 2139095040u)), _e149, ((bitcast<u32>(v147_) & 2147483647u) > 2139095040u));
    let _e164 = subgroupShuffleXor(_e162, 2u);
    let _e177 = select(select(max(_e162, _e164), _e162, ((bitcast<u32>(_e164) & 2147483647u) > 2139095040u)), _e164, ((bitcast<u32>(_e162) & 2147483647u) > 2139095040u));
    let _e179 = subgroupShuffleXor(_e177, 4u);
    workgroupBarrier();
    shared_f32_[((((_e24 >> u32(0i)) & 3i) * 1i) + 0i)] = select(select(max(_e177, _e179), _e177, ((bitcast<u32>(_e179) & 2147483647u) > 2139095040u)), _e179, ((bitcast<u32>(_e177) & 2147483647u) > 2139095040u));
    workgroupBarrier();
    let _e225 = shared_f32_[(0i + 0i)];
    let _e230 = shared_f32_[(1i + 0i)];
    let _e243 = select(select(max(_e225, _e230), _e225, ((bitcast<u32>(_e230) & 2147483647u) > 2139095040u)), _e230, ((bitcast<u32>(_e225) & 2147483647u) > 2139095040u));
    let _e248 = shared_f32_[(2i + 0i)];
    let _e261 = select(select(max(_e243, _e248), _e243, ((bitcast<u32>(_e248) & 2147483647u) > 2139095040u)), _e248, ((bitcast<u32>(_e243) & 2147483647u) > 2139095040u));
    let _e266 = shared_f32_[(3i + 0i)];
    let _e279 = select(select(max(_e261, _e266), _e261, ((bitcast<u32>(_e266) & 2147483647u) > 2139095040u)), _e266, ((bitcast<u32>(_e261) & 2147483647u) > 2139095040u));
    let v280_ = (_e69 - _e279);
    let v281_ = (_e75 - _e279);
    let v282_ = (_e81 - _e279);
    let v283_ = (_e87 - _e279);
    let _e284 = exp(v280_);
    let _e285 = exp(v281_);
    let _e286 = exp(v282_);
    let _e287 = exp(v283_);
    let _e300 = (((_e21 >> u32(0i)) & 7i) + (((_e24 >> u32(0i)) & 3i) * 8i));
    let _e311 = (((_e284 + _e285) + _e286) + _e287);
    let _e313 = subgroupShuffleXor(_e311, 1u);
    let _e314 = (_e311 + _e313);
    let _e316 = subgroupShuffleXor(_e314, 2u);
    let _e317 = (_e314 + _e316);
    let _e319 = subgroupShuffleXor(_e317, 4u);
    workgroupBarrier();
    shared_f32_[((((_e24 >> u32(0i)) & 3i) * 1i) + 0i)] = (_e317 + _e319);
    workgroupBarrier();
    let _e353 = shared_f32_[(0i + 0i)];
    let _e358 = shared_f32_[(1i + 0i)];
    let _e364 = shared_f32_[(2i + 0i)];
    let _e370 = shared_f32_[(3i + 0i)];
    let _e373 = (1f / (((_e353 + _e358) + _e364) + _e370));
    if _e60 {
        y[_e56] = (_e284 * _e373);
    }
    if _e61 {
        y[_e57] = (_e285 * _e373);
    }
    if _e62 {
        y[_e58] = (_e286 * _e373);
    }
    if _e63 {
        y[_e59] = (_e287 * _e373);
    }
}
