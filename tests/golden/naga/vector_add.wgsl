struct Scalars {
    n: i32,
}

@group(0) @binding(0) 
var<storage> x: array<vec4<f32>>;
@group(0) @binding(1) 
var<storage> y: array<vec4<f32>>;
@group(0) @binding(2) 
var<storage, read_write> out: array<vec4<f32>>;
var<immediate> scalars: Scalars;

@compute @workgroup_size(32, 1, 1) 
fn main(@builtin(local_invocation_index) local_invocation_index: u32, @builtin(workgroup_id) workgroup_id: vec3<u32>, @builtin(num_workgroups) num_workgroups: vec3<u32>) {
    let _e2 = bitcast<i32>(local_invocation_index);
    let _e13 = scalars.n;
    let _e26 = (bitcast<i32>(workgroup_id.x) * 256i);
    let _e42 = (((((_e2 & 7i) >> u32(0i)) & 7i) * 4i) + ((((_e2 >> u32(3i)) >> u32(0i)) & 3i) * 32i));
    let _e68 = (_e26 + ((0i + _e42) + 0i));
    let _e72 = (_e26 + ((128i + _e42) + 0i));
    let _e76 = (_e68 < _e13);
    let _e77 = ((_e26 + ((1i + _e42) + 0i)) < _e13);
    let _e78 = ((_e26 + ((2i + _e42) + 0i)) < _e13);
    let _e79 = ((_e26 + ((3i + _e42) + 0i)) < _e13);
    let _e80 = (_e72 < _e13);
    let _e81 = ((_e26 + ((129i + _e42) + 0i)) < _e13);
    let _e82 = ((_e26 + ((130i + _e42) + 0i)) < _e13);
    let _e83 = ((_e26 + ((131i + _e42) + 0i)) < _e13);
    let _e94 = x[(bitcast<u32>(select(0i, _e68, _e76)) >> 2u)];
    let v95_ = _e94.x;
    let v96_ = _e94.y;
    let v97_ = _e94.z;
    let v98_ = _e94.w;
    let _e113 = x[(bitcast<u32>(select(0i, _e72, _e80)) >> 2u)];
    let v114_ = _e113.x;
    let v115_ = _e113.y;
    let v116_ = _e113.z;
    let v117_ = _e113.w;
    let _e133 = y[(bitcast<u32>(select(0i, _e68, _e76)) >> 2u)];
    let v134_ = _e133.x;
    let v135_ = _e133.y;
    let v136_ = _e133.z;
    let v137_ = _e133.w;
    let _e152 = y[(bitcast<u32>(select(0i, _e72, _e80)) >> 2u)];
    let v153_ = _e152.x;
    let v154_ = _e152.y;
    let v155_ = _e152.z;
    let v156_ = _e152.w;
    if _e76 {
        out[(bitcast<u32>(_e68) >> 2u)] = vec4<f32>((select(0f, v95_, _e76) + select(0f, v134_, _e76)), (select(0f, v96_, _e76) + select(0f, v135_, _e76)), (select(0f, v97_, _e76) + select(0f, v136_, _e76)), (select(0f, v98_, _e76) + select(0f, v137_, _e76)));
    }
    if _e80 {
        out[(bitcast<u32>(_e72) >> 2u)] = vec4<f32>((select(0f, v114_, _e80) + select(0f, v153_, _e80)), (select(0f, v115_, _e80) + select(0f, v154_, _e80)), (select(0f, v116_, _e80) + select(0f, v155_, _e80)), (select(0f, v117_, _e80) + select(0f, v156_, _e80)));
    }
}
