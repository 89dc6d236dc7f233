struct Scalars {
    n_cols: i32,
}

@group(0) @binding(0) 
var<storage> x: array<vec4<f32>>;
@group(0) @binding(1) 
var<storage, read_write> y: array<vec4<f32>>;
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
    let _e44 = ((((_e21 >> u32(0i)) & 7i) * 4i) + (((_e24 >> u32(0i)) & 3i) * 32i));
    let _e54 = ((0i + _e44) + 0i);
    let _e55 = ((1i + _e44) + 0i);
    let _e56 = ((2i + _e44) + 0i);
    let _e57 = ((3i + _e44) + 0i);
    let _e58 = (_e25 + _e54);
    let _e62 = (_e54 < _e13);
    let _e63 = (_e55 < _e13);
    let _e64 = (_e56 < _e13);
    let _e65 = (_e57 < _e13);
    let _e76 = x[(bitcast<u32>(select(0i, _e58, _e62)) >> 2u)];
    let v81_ = select(_e29, _e76.x, _e62);
    let v82_ = select(_e29, _e76.y, _e62);
    let v83_ = select(_e29, _e76.z, _e62);
    let v84_ = select(_e29, _e76.w, _e62);
    let _e99 = ((((_e21 >> u32(0i)) & 7i) * 4i) + (((_e24 >> u32(0i)) & 3i) * 32i));
    let _e120 = select(select(max(v81_, v82_), v81_, ((bitcast<u32>(v82_) & 2147483647u) > 2139095040u)), v82_, ((bitcast<u32>(v81_) & 2147483647u) > 2139095040u));
    let _e133 = select(select(max(_e120, v83_), _e120, ((bitcast<u32>(v83_) & 2147483647u) > 2139095040u)), v83_, ((bitcast<u32>(_e120) & 2147483647u) > 2139095040u));
    let _e146 = select(select(max(_e133, v84_), _e133, ((bitcast<u32>(v84_) & 2147483647u) > 2139095040u)), v84_, ((bitcast<u32>(_e133) & 2147483647u) > 2139095040u));
    let _e148 = subgroupShuffleXor(_e146, 1u);
    let v161_ = select(select(max(_e146, _e148), _e146, ((bitcast<u32>(_e148) & 2147483647u) > 2139095040u)), _e148, ((bitcast<u32>(_e146) & 2147483647u) > 2139095040u));
    let _e163 = subgroupShuffleXor(v161_, 2u);
    let _e176 = select(select(max(v161_, _e163), v161_, ((bitcast<u32>(_e163) & 2147483647u) > 2139095040u)), _e163, ((bitcast<u32>(v161_) & 2147483647u) > 2139095040u));
    let _e178 = subgroupShuffleXor(_e176, 4u);
    workgroupBarrier();
    shared_f32_[((((_e24 >> u32(0i)) & 3i) * 1i) + 0i)] = select(select(max(_e176, _e178), _e176, ((bitcast<u32>(_e178) & 2147483647u) > 2139095040u)), _e178, ((bitcast<u32>(_e176) & 2147483647u) > 2139095040u));
    workgroupBarrier();
    let _e226 = shared_f32_[(0i + 0i)];
    let _e231 = shared_f32_[(1i + 0i)];
    let _e244 = select(select(max(_e226, _e231), _e226, ((bitcast<u32>(_e231) & 2147483647u) > 2139095040u)), _e231, ((bitcast<u32>(_e226) & 2147483647u) > 2139095040u));
    let _e249 = shared_f32_[(2i + 0i)];
    let _e262 = select(select(max(_e244, _e249), _e244, ((bitcast<u32>(_e249) & 2147483647u) > 2139095040u)), _e249, ((bitcast<u32>(_e244) & 2147483647u) > 2139095040u));
    let _e267 = shared_f32_[(3i + 0i)];
    let _e280 = select(select(max(_e262, _e267), _e262, ((bitcast<u32>(_e267) & 2147483647u) > 2139095040u)), _e267, ((bitcast<u32>(_e262) & 2147483647u) > 2139095040u));
    let v281_ = (v81_ - _e280);
    let v282_ = (v82_ - _e280);
    let v283_ = (v83_ - _e280);
    let v284_ = (v84_ - _e280);
    let _e285 = exp(v281_);
    let _e286 = exp(v282_);
    let _e287 = exp(v283_);
    let _e288 = exp(v284_);
    let _e303 = ((((_e21 >> u32(0i)) & 7i) * 4i) + (((_e24 >> u32(0i)) & 3i) * 32i));
    let _e314 = (((_e285 + _e286) + _e287) + _e288);
    let _e316 = subgroupShuffleXor(_e314, 1u);
    let _e317 = (_e314 + _e316);
    let _e319 = subgroupShuffleXor(_e317, 2u);
    let _e320 = (_e317 + _e319);
    let _e322 = subgroupShuffleXor(_e320, 4u);
    workgroupBarrier();
    shared_f32_[((((_e24 >> u32(0i)) & 3i) * 1i) + 0i)] = (_e320 + _e322);
    workgroupBarrier();
    let _e358 = shared_f32_[(0i + 0i)];
    let _e363 = shared_f32_[(1i + 0i)];
    let _e369 = shared_f32_[(2i + 0i)];
    let _e375 = shared_f32_[(3i + 0i)];
    let _e378 = (1f / (((_e358 + _e363) + _e369) + _e375));
    if _e62 {
        y[(bitcast<u32>(_e58) >> 2u)] = vec4<f32>((_e285 * _e378), (_e286 * _e378), (_e287 * _e378), (_e288 * _e378));
    }
}
