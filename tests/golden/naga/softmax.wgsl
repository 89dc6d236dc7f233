struct Scalars {
    n_cols: i32,
}

@group(0) @binding(0) 
var<storage> x: array<f32>;
@group(0) @binding(1) 
var<storage, read_write> y: array<f32>;
var<immediate> scalars: Scalars;
var<workgroup> shared_f32_: array<f32, 128>;

@compute @workgroup_size(32, 1, 1) 
fn main(@builtin(local_invocation_index) local_invocation_index: u32, @builtin(workgroup_id) workgroup_id: vec3<u32>, @builtin(num_workgroups) num_workgroups: vec3<u32>) {
    var local: i32;
    var local_1: f32;
    var local_2: i32;
    var local_3: f32;

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
    workgroupBarrier();
    let _e119 = (((_e21 >> u32(0i)) & 7i) + (((_e24 >> u32(0i)) & 3i) * 8i));
    shared_f32_[(0i + _e119)] = _e67;
    shared_f32_[(32i + _e119)] = _e73;
    shared_f32_[(64i + _e119)] = _e79;
    shared_f32_[(96i + _e119)] = _e85;
    workgroupBarrier();
    let _e156 = shared_f32_[0i];
    local = 1i;
    local_1 = _e156;
    loop {
        let _e164 = local;
        if !(select((_e164 > 128i), (_e164 < 128i), (1i > 0i))) {
            break;
        }
        let _e172 = local_1;
        let _e178 = shared_f32_[(0i + (_e164 * 1i))];
        local_1 = select(select(max(_e172, _e178), _e172, ((bitcast<u32>(_e178) & 2147483647u) > 2139095040u)), _e178, ((bitcast<u32>(_e172) & 2147483647u) > 2139095040u));
        let _e194 = local;
        local = (_e194 + 1i);
    }
    let _e198 = local_1;
    let _e203 = exp((_e67 - _e198));
    let _e204 = exp((_e73 - _e198));
    let _e205 = exp((_e79 - _e198));
    let _e206 = exp((_e85 - _e198));
    let _e219 = (((_e21 >> u32(0i)) & 7i) + (((_e24 >> u32(0i)) & 3i) * 8i));
    workgroupBarrier();
    let _e240 = (((_e21 >> u32(0i)) & 7i) + (((_e24 >> u32(0i)) & 3i) * 8i));
    shared_f32_[(0i + _e240)] = _e203;
    shared_f32_[(32i + _e240)] = _e204;
    shared_f32_[(64i + _e240)] = _e205;
    shared_f32_[(96i + _e240)] = _e206;
    workgroupBarrier();
    let _e277 = shared_f32_[0i];
    local_2 = 1i;
    local_3 = _e277;
    loop {
        let _e285 = local_2;
        if !(select((_e285 > 128i), (_e285 < 128i), (1i > 0i))) {
            break;
        }
        let _e293 = local_3;
        let _e299 = shared_f32_[(0i + (_e285 * 1i))];
        local_3 = (_e293 + _e299);
        let _e303 = local_2;
        local_2 = (_e303 + 1i);
    }
    let _e307 = local_3;
    let _e309 = (1f / _e307);
    if _e58 {
        y[_e54] = (_e203 * _e309);
    }
    if _e59 {
        y[_e55] = (_e204 * _e309);
    }
    if _e60 {
        y[_e56] = (_e205 * _e309);
    }
    if _e61 {
        y[_e57] = (_e206 * _e309);
    }
}
