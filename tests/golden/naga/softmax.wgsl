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
    let _e27 = bitcast<f32>(4286578688u);
    let _e2 = bitcast<i32>(local_invocation_index);
    let _e13 = scalars.n_cols;
    let _e21 = (_e2 & 7i);
    let _e24 = (_e2 >> u32(3i));
    let _e25 = (bitcast<i32>(workgroup_id.x) * _e13);
    let _e40 = (((_e21 >> u32(0i)) & 7i) + (((_e24 >> u32(0i)) & 3i) * 8i));
    let _e50 = ((0i + _e40) + 0i);
    let _e51 = ((32i + _e40) + 0i);
    let _e52 = ((64i + _e40) + 0i);
    let _e53 = ((96i + _e40) + 0i);
    let _e54 = (_e25 + _e50);
    let _e55 = (_e25 + _e51);
    let _e56 = (_e25 + _e52);
    let _e57 = (_e25 + _e53);
    let _e58 = (_e50 < _e13);
    let _e59 = (_e51 < _e13);
    let _e60 = (_e52 < _e13);
    let _e61 = (_e53 < _e13);
    let _e66 = x[select(0i, _e54, _e58)];
    let _e67 = select(_e27, _e66, _e58);
    let _e72 = x[select(0i, _e55, _e59)];
    let _e73 = select(_e27, _e72, _e59);
    let _e78 = x[select(0i, _e56, _e60)];
    let _e79 = select(_e27, _e78, _e60);
    let _e84 = x[select(0i, _e57, _e61)];
    let _e85 = select(_e27, _e84, _e61);
    let _e98 = (((_e21 >> u32(0i)) & 7i) + (((_e24 >> u32(0i)) & 3i) * 8i));
    let v112_ = ((bitcast<u32>(_e73) & 2147483647u) > 2139095040u);
    let v118_ = ((bitcast<u32>(_e67) & 2147483647u) > 2139095040u);
    let v119_ = select(select(max(_e67, _e73), _e67, v112_), _e73, v118_);
    let v125_ = ((bitcast<u32>(_e79) & 2147483647u) > 2139095040u);
    let v132_ = select(select(max(v119_, _e79), v119_, v125_), _e79, ((bitcast<u32>(v119_) & 2147483647u) > 2139095040u));
    let v138_ = ((bitcast<u32>(_e85) & 2147483647u) > 2139095040u);
    let v145_ = select(select(max(v132_, _e85), v132_, v138_), _e85, ((bitcast<u32>(v132_) & 2147483647u) > 2139095040u));
    let _e147 = subgroupShuffleXor(v145_, 1u);
    let _e160 = select(select(max(v145_, _e147), v145_, ((bitcast<u32>(_e147) & 2147483647u) > 2139095040u)), _e147, ((bitcast<u32>(v145_) & 2147483647u) > 2139095040u));
    let _e162 = subgroupShuffleXor(_e160, 2u);
    let _e175 = select(select(max(_e160, _e162), _e160, ((bitcast<u32>(_e162) & 2147483647u) > 2139095040u)), _e162, ((bitcast<u32>(_e160) & 2147483647u) > 2139095040u));
    let _e177 = subgroupShuffleXor(_e175, 4u);
    workgroupBarrier();
    shared_f32_[((((_e24 >> u32(0i)) & 3i) * 1i) + 0i)] = select(select(max(_e175, _e177), _e175, ((bitcast<u32>(_e177) & 2147483647u) > 2139095040u)), _e177, ((bitcast<u32>(_e175) & 2147483647u) > 2139095040u));
    workgroupBarrier();
    let _e223 = shared_f32_[(0i + 0i)];
    let _e228 = shared_f32_[(1i + 0i)];
    let _e241 = select(select(max(_e223, _e228), _e223, ((bitcast<u32>(_e228) & 2147483647u) > 2139095040u)), _e228, ((bitcast<u32>(_e223) & 2147483647u) > 2139095040u));
    let _e246 = shared_f32_[(2i + 0i)];
    let _e259 = select(select(max(_e241, _e246), _e241, ((bitcast<u32>(_e246) & 2147483647u) > 2139095040u)), _e246, ((bitcast<u32>(_e241) & 2147483647u) > 2139095040u));
    let _e264 = shared_f32_[(3i + 0i)];
    let _e277 = select(select(max(_e259, _e264), _e259, ((bitcast<u32>(_e264) & 2147483647u) > 2139095040u)), _e264, ((bitcast<u32>(_e259) & 2147483647u) > 2139095040u));
    let v278_ = (_e67 - _e277);
    let v279_ = (_e73 - _e277);
    let v280_ = (_e79 - _e277);
    let v281_ = (_e85 - _e277);
    let _e282 = exp(v278_);
    let _e283 = exp(v279_);
    let _e284 = exp(v280_);
    let _e285 = exp(v281_);
    let _e298 = (((_e21 >> u32(0i)) & 7i) + (((_e24 >> u32(0i)) & 3i) * 8i));
    let _e309 = (((_e282 + _e283) + _e284) + _e285);
    let _e311 = subgroupShuffleXor(_e309, 1u);
    let _e312 = (_e309 + _e311);
    let _e314 = subgroupShuffleXor(_e312, 2u);
    let _e315 = (_e312 + _e314);
    let _e317 = subgroupShuffleXor(_e315, 4u);
    workgroupBarrier();
    shared_f32_[((((_e24 >> u32(0i)) & 3i) * 1i) + 0i)] = (_e315 + _e317);
    workgroupBarrier();
    let _e351 = shared_f32_[(0i + 0i)];
    let _e356 = shared_f32_[(1i + 0i)];
    let _e362 = shared_f32_[(2i + 0i)];
    let _e368 = shared_f32_[(3i + 0i)];
    let _e371 = (1f / (((_e351 + _e356) + _e362) + _e368));
    if _e58 {
        y[_e54] = (_e282 * _e371);
    }
    if _e59 {
        y[_e55] = (_e283 * _e371);
    }
    if _e60 {
        y[_e56] = (_e284 * _e371);
    }
    if _e61 {
        y[_e57] = (_e285 * _e371);
    }
}
