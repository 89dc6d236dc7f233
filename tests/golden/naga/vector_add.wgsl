struct Scalars {
    n: i32,
}

@group(0) @binding(0) 
var<storage> x: array<f32>;
@group(0) @binding(1) 
var<storage> y: array<f32>;
@group(0) @binding(2) 
var<storage, read_write> out: array<f32>;
var<immediate> scalars: Scalars;

@compute @workgroup_size(32, 1, 1) 
fn main(@builtin(local_invocation_index) local_invocation_index: u32, @builtin(workgroup_id) workgroup_id: vec3<u32>, @builtin(num_workgroups) num_workgroups: vec3<u32>) {
    let _e2 = bitcast<i32>(local_invocation_index);
    let _e13 = scalars.n;
    let _e26 = (bitcast<i32>(workgroup_id.x) * 256i);
    let _e40 = ((((_e2 & 7i) >> u32(0i)) & 7i) + ((((_e2 >> u32(3i)) >> u32(0i)) & 3i) * 8i));
    let _e66 = (_e26 + ((0i + _e40) + 0i));
    let _e67 = (_e26 + ((32i + _e40) + 0i));
    let _e68 = (_e26 + ((64i + _e40) + 0i));
    let _e69 = (_e26 + ((96i + _e40) + 0i));
    let _e70 = (_e26 + ((128i + _e40) + 0i));
    let _e71 = (_e26 + ((160i + _e40) + 0i));
    let _e72 = (_e26 + ((192i + _e40) + 0i));
    let _e73 = (_e26 + ((224i + _e40) + 0i));
    let _e74 = (_e66 < _e13);
    let _e75 = (_e67 < _e13);
    let _e76 = (_e68 < _e13);
    let _e77 = (_e69 < _e13);
    let _e78 = (_e70 < _e13);
    let _e79 = (_e71 < _e13);
    let _e80 = (_e72 < _e13);
    let _e81 = (_e73 < _e13);
    let _e86 = x[select(0i, _e66, _e74)];
    let _e92 = x[select(0i, _e67, _e75)];
    let _e98 = x[select(0i, _e68, _e76)];
    let _e104 = x[select(0i, _e69, _e77)];
    let _e110 = x[select(0i, _e70, _e78)];
    let _e116 = x[select(0i, _e71, _e79)];
    let _e122 = x[select(0i, _e72, _e80)];
    let _e128 = x[select(0i, _e73, _e81)];
    let _e135 = y[select(0i, _e66, _e74)];
    let _e141 = y[select(0i, _e67, _e75)];
    let _e147 = y[select(0i, _e68, _e76)];
    let _e153 = y[select(0i, _e69, _e77)];
    let _e159 = y[select(0i, _e70, _e78)];
    let _e165 = y[select(0i, _e71, _e79)];
    let _e171 = y[select(0i, _e72, _e80)];
    let _e177 = y[select(0i, _e73, _e81)];
    if _e74 {
        out[_e66] = (select(0f, _e86, _e74) + select(0f, _e135, _e74));
    }
    if _e75 {
        out[_e67] = (select(0f, _e92, _e75) + select(0f, _e141, _e75));
    }
    if _e76 {
        out[_e68] = (select(0f, _e98, _e76) + select(0f, _e147, _e76));
    }
    if _e77 {
        out[_e69] = (select(0f, _e104, _e77) + select(0f, _e153, _e77));
    }
    if _e78 {
        out[_e70] = (select(0f, _e110, _e78) + select(0f, _e159, _e78));
    }
    if _e79 {
        out[_e71] = (select(0f, _e116, _e79) + select(0f, _e165, _e79));
    }
    if _e80 {
        out[_e72] = (select(0f, _e122, _e80) + select(0f, _e171, _e80));
    }
    if _e81 {
        out[_e73] = (select(0f, _e128, _e81) + select(0f, _e177, _e81));
    }
}
