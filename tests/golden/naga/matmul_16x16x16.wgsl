struct Scalars {
    M: i32,
    N: i32,
    K: i32,
}

@group(0) @binding(0) 
var<storage> a: array<f32>;
@group(0) @binding(1) 
var<storage> b: array<f32>;
@group(0) @binding(2) 
var<storage, read_write> c: array<f32>;
var<immediate> scalars: Scalars;
var<workgroup> shared_f32_: array<f32, 512>;

@compute @workgroup_size(8, 1, 1) 
fn main(@builtin(local_invocation_index) local_invocation_index: u32, @builtin(workgroup_id) workgroup_id: vec3<u32>, @builtin(num_workgroups) num_workgroups: vec3<u32>) {
    var local: i32;
    var local_1: f32;
    var local_2: f32;
    var local_3: f32;
    var local_4: f32;
    var local_5: f32;
    var local_6: f32;
    var local_7: f32;
    var local_8: f32;
    var local_9: f32;
    var local_10: f32;
    var local_11: f32;
    var local_12: f32;
    var local_13: f32;
    var local_14: f32;
    var local_15: f32;
    var local_16: f32;
    var local_17: f32;
    var local_18: f32;
    var local_19: f32;
    var local_20: f32;
    var local_21: f32;
    var local_22: f32;
    var local_23: f32;
    var local_24: f32;
    var local_25: f32;
    var local_26: f32;
    var local_27: f32;
    var local_28: f32;
    var local_29: f32;
    var local_30: f32;
    var local_31: f32;
    var local_32: f32;
    var local_33: i32;
    var local_34: f32;
    var local_35: f32;
    var local_36: f32;
    var local_37: f32;
    var local_38: f32;
    var local_39: f32;
    var local_40: f32;
    var local_41: f32;
    var local_42: f32;
    var local_43: f32;
    var local_44: f32;
    var local_45: f32;
    var local_46: f32;
    var local_47: f32;
    var local_48: f32;
    var local_49: f32;
    var local_50: f32;
    var local_51: f32;
    var local_52: f32;
    var local_53: f32;
    var local_54: f32;
    var local_55: f32;
    var local_56: f32;
    var local_57: f32;
    var local_58: f32;
    var local_59: f32;
    var local_60: f32;
    var local_61: f32;
    var local_62: f32;
    var local_63: f32;
    var local_64: f32;
    var local_65: f32;

    let _e2 = bitcast<i32>(local_invocation_index);
    let _e13 = scalars.M;
    let _e15 = scalars.N;
    let _e17 = scalars.K;
    let _e18 = bitcast<i32>(workgroup_id.x);
    let _e25 = (_e2 & 7i);
    let _e38 = (((_e15 + 15i) / 16i) * 1i);
    let _e41 = ((_e18 / _e38) * 1i);
    let _e42 = (((_e13 + 15i) / 16i) - _e41);
    let _e45 = select(1i, _e42, (_e42 < 1i));
    let _e46 = (_e18 % _e38);
    let _e51 = ((_e41 + (_e46 % _e45)) * 16i);
    let _e53 = ((_e46 / _e45) * 16i);
    let _e57 = ((_e17 + 15i) / 16i);
    local = 0i;
    local_1 = 0f;
    local_2 = 0f;
    local_3 = 0f;
    local_4 = 0f;
    local_5 = 0f;
    local_6 = 0f;
    local_7 = 0f;
    local_8 = 0f;
    local_9 = 0f;
    local_10 = 0f;
    local_11 = 0f;
    local_12 = 0f;
    local_13 = 0f;
    local_14 = 0f;
    local_15 = 0f;
    local_16 = 0f;
    local_17 = 0f;
    local_18 = 0f;
    local_19 = 0f;
    local_20 = 0f;
    local_21 = 0f;
    local_22 = 0f;
    local_23 = 0f;
    local_24 = 0f;
    local_25 = 0f;
    local_26 = 0f;
    local_27 = 0f;
    local_28 = 0f;
    local_29 = 0f;
    local_30 = 0f;
    local_31 = 0f;
    local_32 = 0f;
    loop {
        let _e95 = local;
        if !(select((_e95 > _e57), (_e95 < _e57), (1i > 0i))) {
            break;
        }
        let _e103 = local_1;
        let _e105 = local_2;
        let _e107 = local_3;
        let _e109 = local_4;
        let _e111 = local_5;
        let _e113 = local_6;
        let _e115 = local_7;
        let _e117 = local_8;
        let _e119 = local_9;
        let _e121 = local_10;
        let _e123 = local_11;
        let _e125 = local_12;
        let _e127 = local_13;
        let _e129 = local_14;
        let _e131 = local_15;
        let _e133 = local_16;
        let _e135 = local_17;
        let _e137 = local_18;
        let _e139 = local_19;
        let _e141 = local_20;
        let _e143 = local_21;
        let _e145 = local_22;
        let _e147 = local_23;
        let _e149 = local_24;
        let _e151 = local_25;
        let _e153 = local_26;
        let _e155 = local_27;
        let _e157 = local_28;
        let _e159 = local_29;
        let _e161 = local_30;
        let _e163 = local_31;
        let _e165 = local_32;
        let _e167 = (_e95 * 16i);
        let _e209 = (_e51 + (0i + 0i));
        let _e210 = (_e51 + (1i + 0i));
        let _e211 = (_e51 + (2i + 0i));
        let _e212 = (_e51 + (3i + 0i));
        let _e213 = (_e51 + (4i + 0i));
        let _e214 = (_e51 + (5i + 0i));
        let _e215 = (_e51 + (6i + 0i));
        let _e216 = (_e51 + (7i + 0i));
        let _e217 = (_e51 + (8i + 0i));
        let _e218 = (_e51 + (9i + 0i));
        let _e219 = (_e51 + (10i + 0i));
        let _e220 = (_e51 + (11i + 0i));
        let _e221 = (_e51 + (12i + 0i));
        let _e222 = (_e51 + (13i + 0i));
        let _e223 = (_e51 + (14i + 0i));
        let _e224 = (_e51 + (15i + 0i));
        let _e225 = (_e209 * _e17);
        let _e226 = (_e210 * _e17);
        let _e227 = (_e211 * _e17);
        let _e228 = (_e212 * _e17);
        let _e229 = (_e213 * _e17);
        let _e230 = (_e214 * _e17);
        let _e231 = (_e215 * _e17);
        let _e232 = (_e216 * _e17);
        let _e233 = (_e217 * _e17);
        let _e234 = (_e218 * _e17);
        let _e235 = (_e219 * _e17);
        let _e236 = (_e220 * _e17);
        let _e237 = (_e221 * _e17);
        let _e238 = (_e222 * _e17);
        let _e239 = (_e223 * _e17);
        let _e240 = (_e224 * _e17);
        let _e245 = ((_e25 >> u32(0i)) & 7i);
        let _e253 = (_e167 + ((0i + _e245) + 0i));
        let _e254 = (_e167 + ((8i + _e245) + 0i));
        let _e287 = (_e209 < _e13);
        let _e288 = (_e210 < _e13);
        let _e289 = (_e211 < _e13);
        let _e290 = (_e212 < _e13);
        let _e291 = (_e213 < _e13);
        let _e292 = (_e214 < _e13);
        let _e293 = (_e215 < _e13);
        let _e294 = (_e216 < _e13);
        let _e295 = (_e217 < _e13);
        let _e296 = (_e218 < _e13);
        let _e297 = (_e219 < _e13);
        let _e298 = (_e220 < _e13);
        let _e299 = (_e221 < _e13);
        let _e300 = (_e222 < _e13);
        let _e301 = (_e223 < _e13);
        let _e302 = (_e224 < _e13);
        let _e303 = (_e253 < _e17);
        let _e304 = (_e254 < _e17);
        let _e305 = (_e287 && _e303);
        let _e306 = (_e287 && _e304);
        let _e307 = (_e288 && _e303);
        let _e308 = (_e288 && _e304);
        let _e309 = (_e289 && _e303);
        let _e310 = (_e289 && _e304);
        let _e311 = (_e290 && _e303);
        let _e312 = (_e290 && _e304);
        let _e313 = (_e291 && _e303);
        let _e314 = (_e291 && _e304);
        let _e315 = (_e292 && _e303);
        let _e316 = (_e292 && _e304);
        let _e317 = (_e293 && _e303);
        let _e318 = (_e293 && _e304);
        let _e319 = (_e294 && _e303);
        let _e320 = (_e294 && _e304);
        let _e321 = (_e295 && _e303);
        let _e322 = (_e295 && _e304);
        let _e323 = (_e296 && _e303);
        let _e324 = (_e296 && _e304);
        let _e325 = (_e297 && _e303);
        let _e326 = (_e297 && _e304);
        let _e327 = (_e298 && _e303);
        let _e328 = (_e298 && _e304);
        let _e329 = (_e299 && _e303);
        let _e330 = (_e299 && _e304);
        let _e331 = (_e300 && _e303);
        let _e332 = (_e300 && _e304);
        let _e333 = (_e301 && _e303);
        let _e334 = (_e301 && _e304);
        let _e335 = (_e302 && _e303);
        let _e336 = (_e302 && _e304);
        let _e341 = a[select(0i, (_e225 + _e253), _e305)];
        let _e347 = a[select(0i, (_e225 + _e254), _e306)];
        let _e353 = a[select(0i, (_e226 + _e253), _e307)];
        let _e359 = a[select(0i, (_e226 + _e254), _e308)];
        let _e365 = a[select(0i, (_e227 + _e253), _e309)];
        let _e371 = a[select(0i, (_e227 + _e254), _e310)];
        let _e377 = a[select(0i, (_e228 + _e253), _e311)];
        let _e383 = a[select(0i, (_e228 + _e254), _e312)];
        let _e389 = a[select(0i, (_e229 + _e253), _e313)];
        let _e395 = a[select(0i, (_e229 + _e254), _e314)];
        let _e401 = a[select(0i, (_e230 + _e253), _e315)];
        let _e407 = a[select(0i, (_e230 + _e254), _e316)];
        let _e413 = a[select(0i, (_e231 + _e253), _e317)];
        let _e419 = a[select(0i, (_e231 + _e254), _e318)];
        let _e425 = a[select(0i, (_e232 + _e253), _e319)];
        let _e431 = a[select(0i, (_e232 + _e254), _e320)];
        let _e437 = a[select(0i, (_e233 + _e253), _e321)];
        let _e443 = a[select(0i, (_e233 + _e254), _e322)];
        let _e449 = a[select(0i, (_e234 + _e253), _e323)];
        let _e455 = a[select(0i, (_e234 + _e254), _e324)];
        let _e461 = a[select(0i, (_e235 + _e253), _e325)];
        let _e467 = a[select(0i, (_e235 + _e254), _e326)];
        let _e473 = a[select(0i, (_e236 + _e253), _e327)];
        let _e479 = a[select(0i, (_e236 + _e254), _e328)];
        let _e485 = a[select(0i, (_e237 + _e253), _e329)];
        let _e491 = a[select(0i, (_e237 + _e254), _e330)];
        let _e497 = a[select(0i, (_e238 + _e253), _e331)];
        let _e503 = a[select(0i, (_e238 + _e254), _e332)];
        let _e509 = a[select(0i, (_e239 + _e253), _e333)];
        let _e515 = a[select(0i, (_e239 + _e254), _e334)];
        let _e521 = a[select(0i, (_e240 + _e253), _e335)];
        let _e527 = a[select(0i, (_e240 + _e254), _e336)];
        let _e570 = (_e167 + (0i + 0i));
        let _e571 = (_e167 + (1i + 0i));
        let _e572 = (_e167 + (2i + 0i));
        let _e573 = (_e167 + (3i + 0i));
        let _e574 = (_e167 + (4i + 0i));
        let _e575 = (_e167 + (5i + 0i));
        let _e576 = (_e167 + (6i + 0i));
        let _e577 = (_e167 + (7i + 0i));
        let _e578 = (_e167 + (8i + 0i));
        let _e579 = (_e167 + (9i + 0i));
        let _e580 = (_e167 + (10i + 0i));
        let _e581 = (_e167 + (11i + 0i));
        let _e582 = (_e167 + (12i + 0i));
        let _e583 = (_e167 + (13i + 0i));
        let _e584 = (_e167 + (14i + 0i));
        let _e585 = (_e167 + (15i + 0i));
        let _e586 = (_e570 * _e15);
        let _e587 = (_e571 * _e15);
        let _e588 = (_e572 * _e15);
        let _e589 = (_e573 * _e15);
        let _e590 = (_e574 * _e15);
        let _e591 = (_e575 * _e15);
        let _e592 = (_e576 * _e15);
        let _e593 = (_e577 * _e15);
        let _e594 = (_e578 * _e15);
        let _e595 = (_e579 * _e15);
        let _e596 = (_e580 * _e15);
        let _e597 = (_e581 * _e15);
        let _e598 = (_e582 * _e15);
        let _e599 = (_e583 * _e15);
        let _e600 = (_e584 * _e15);
        let _e601 = (_e585 * _e15);
        let _e606 = ((_e25 >> u32(0i)) & 7i);
        let _e614 = (_e53 + ((0i + _e606) + 0i));
        let _e615 = (_e53 + ((8i + _e606) + 0i));
        let _e648 = (_e570 < _e17);
        let _e649 = (_e571 < _e17);
        let _e650 = (_e572 < _e17);
        let _e651 = (_e573 < _e17);
        let _e652 = (_e574 < _e17);
        let _e653 = (_e575 < _e17);
        let _e654 = (_e576 < _e17);
        let _e655 = (_e577 < _e17);
        let _e656 = (_e578 < _e17);
        let _e657 = (_e579 < _e17);
        let _e658 = (_e580 < _e17);
        let _e659 = (_e581 < _e17);
        let _e660 = (_e582 < _e17);
        let _e661 = (_e583 < _e17);
        let _e662 = (_e584 < _e17);
        let _e663 = (_e585 < _e17);
        let _e664 = (_e614 < _e15);
        let _e665 = (_e615 < _e15);
        let _e666 = (_e648 && _e664);
        let _e667 = (_e648 && _e665);
        let _e668 = (_e649 && _e664);
        let _e669 = (_e649 && _e665);
        let _e670 = (_e650 && _e664);
        let _e671 = (_e650 && _e665);
        let _e672 = (_e651 && _e664);
        let _e673 = (_e651 && _e665);
        let _e674 = (_e652 && _e664);
        let _e675 = (_e652 && _e665);
        let _e676 = (_e653 && _e664);
        let _e677 = (_e653 && _e665);
        let _e678 = (_e654 && _e664);
        let _e679 = (_e654 && _e665);
        let _e680 = (_e655 && _e664);
        let _e681 = (_e655 && _e665);
        let _e682 = (_e656 && _e664);
        let _e683 = (_e656 && _e665);
        let _e684 = (_e657 && _e664);
        let _e685 = (_e657 && _e665);
        let _e686 = (_e658 && _e664);
        let _e687 = (_e658 && _e665);
        let _e688 = (_e659 && _e664);
        let _e689 = (_e659 && _e665);
        let _e690 = (_e660 && _e664);
        let _e691 = (_e660 && _e665);
        let _e692 = (_e661 && _e664);
        let _e693 = (_e661 && _e665);
        let _e694 = (_e662 && _e664);
        let _e695 = (_e662 && _e665);
        let _e696 = (_e663 && _e664);
        let _e697 = (_e663 && _e665);
        let _e702 = b[select(0i, (_e586 + _e614), _e666)];
        let _e708 = b[select(0i, (_e586 + _e615), _e667)];
        let _e714 = b[select(0i, (_e587 + _e614), _e668)];
        let _e720 = b[select(0i, (_e587 + _e615), _e669)];
        let _e726 = b[select(0i, (_e588 + _e614), _e670)];
        let _e732 = b[select(0i, (_e588 + _e615), _e671)];
        let _e738 = b[select(0i, (_e589 + _e614), _e672)];
        let _e744 = b[select(0i, (_e589 + _e615), _e673)];
        let _e750 = b[select(0i, (_e590 + _e614), _e674)];
        let _e756 = b[select(0i, (_e590 + _e615), _e675)];
        let _e762 = b[select(0i, (_e591 + _e614), _e676)];
        let _e768 = b[select(0i, (_e591 + _e615), _e677)];
        let _e774 = b[select(0i, (_e592 + _e614), _e678)];
        let _e780 = b[select(0i, (_e592 + _e615), _e679)];
        let _e786 = b[select(0i, (_e593 + _e614), _e680)];
        let _e792 = b[select(0i, (_e593 + _e615), _e681)];
        let _e798 = b[select(0i, (_e594 + _e614), _e682)];
        let _e804 = b[select(0i, (_e594 + _e615), _e683)];
        let _e810 = b[select(0i, (_e595 + _e614), _e684)];
        let _e816 = b[select(0i, (_e595 + _e615), _e685)];
        let _e822 = b[select(0i, (_e596 + _e614), _e686)];
        let _e828 = b[select(0i, (_e596 + _e615), _e687)];
        let _e834 = b[select(0i, (_e597 + _e614), _e688)];
        let _e840 = b[select(0i, (_e597 + _e615), _e689)];
        let _e846 = b[select(0i, (_e598 + _e614), _e690)];
        let _e852 = b[select(0i, (_e598 + _e615), _e691)];
        let _e858 = b[select(0i, (_e599 + _e614), _e692)];
        let _e864 = b[select(0i, (_e599 + _e615), _e693)];
        let _e870 = b[select(0i, (_e600 + _e614), _e694)];
        let _e876 = b[select(0i, (_e600 + _e615), _e695)];
        let _e882 = b[select(0i, (_e601 + _e614), _e696)];
        let _e888 = b[select(0i, (_e601 + _e615), _e697)];
        let _e900 = ((0i * 16i) + ((_e25 >> u32(0i)) & 7i));
        let _e908 = ((0i * 16i) + ((_e25 >> u32(0i)) & 7i));
        workgroupBarrier();
        shared_f32_[_e900] = select(0f, _e341, _e305);
        shared_f32_[(_e900 + 8i)] = select(0f, _e347, _e306);
        shared_f32_[(_e900 + 16i)] = select(0f, _e353, _e307);
        shared_f32_[(_e900 + 24i)] = select(0f, _e359, _e308);
        shared_f32_[(_e900 + 32i)] = select(0f, _e365, _e309);
        shared_f32_[(_e900 + 40i)] = select(0f, _e371, _e310);
        shared_f32_[(_e900 + 48i)] = select(0f, _e377, _e311);
        shared_f32_[(_e900 + 56i)] = select(0f, _e383, _e312);
        shared_f32_[(_e900 + 64i)] = select(0f, _e389, _e313);
        shared_f32_[(_e900 + 72i)] = select(0f, _e395, _e314);
        shared_f32_[(_e900 + 80i)] = select(0f, _e401, _e315);
        shared_f32_[(_e900 + 88i)] = select(0f, _e407, _e316);
        shared_f32_[(_e900 + 96i)] = select(0f, _e413, _e317);
        shared_f32_[(_e900 + 104i)] = select(0f, _e419, _e318);
        shared_f32_[(_e900 + 112i)] = select(0f, _e425, _e319);
        shared_f32_[(_e900 + 120i)] = select(0f, _e431, _e320);
        shared_f32_[(_e900 + 128i)] = select(0f, _e437, _e321);
        shared_f32_[(_e900 + 136i)] = select(0f, _e443, _e322);
        shared_f32_[(_e900 + 144i)] = select(0f, _e449, _e323);
        shared_f32_[(_e900 + 152i)] = select(0f, _e455, _e324);
        shared_f32_[(_e900 + 160i)] = select(0f, _e461, _e325);
        shared_f32_[(_e900 + 168i)] = select(0f, _e467, _e326);
        shared_f32_[(_e900 + 176i)] = select(0f, _e473, _e327);
        shared_f32_[(_e900 + 184i)] = select(0f, _e479, _e328);
        shared_f32_[(_e900 + 192i)] = select(0f, _e485, _e329);
        shared_f32_[(_e900 + 200i)] = select(0f, _e491, _e330);
        shared_f32_[(_e900 + 208i)] = select(0f, _e497, _e331);
        shared_f32_[(_e900 + 216i)] = select(0f, _e503, _e332);
        shared_f32_[(_e900 + 224i)] = select(0f, _e509, _e333);
        shared_f32_[(_e900 + 232i)] = select(0f, _e515, _e334);
        shared_f32_[(_e900 + 240i)] = select(0f, _e521, _e335);
        shared_f32_[(_e900 + 248i)] = select(0f, _e527, _e336);
        shared_f32_[(_e908 + 256i)] = select(0f, _e702, _e666);
        shared_f32_[(_e908 + 264i)] = select(0f, _e708, _e667);
        shared_f32_[(_e908 + 272i)] = select(0f, _e714, _e668);
        shared_f32_[(_e908 + 280i)] = select(0f, _e720, _e669);
        shared_f32_[(_e908 + 288i)] = select(0f, _e726, _e670);
        shared_f32_[(_e908 + 296i)] = select(0f, _e732, _e671);
        shared_f32_[(_e908 + 304i)] = select(0f, _e738, _e672);
        shared_f32_[(_e908 + 312i)] = select(0f, _e744, _e673);
        shared_f32_[(_e908 + 320i)] = select(0f, _e750, _e674);
        shared_f32_[(_e908 + 328i)] = select(0f, _e756, _e675);
        shared_f32_[(_e908 + 336i)] = select(0f, _e762, _e676);
        shared_f32_[(_e908 + 344i)] = select(0f, _e768, _e677);
        shared_f32_[(_e908 + 352i)] = select(0f, _e774, _e678);
        shared_f32_[(_e908 + 360i)] = select(0f, _e780, _e679);
        shared_f32_[(_e908 + 368i)] = select(0f, _e786, _e680);
        shared_f32_[(_e908 + 376i)] = select(0f, _e792, _e681);
        shared_f32_[(_e908 + 384i)] = select(0f, _e798, _e682);
        shared_f32_[(_e908 + 392i)] = select(0f, _e804, _e683);
        shared_f32_[(_e908 + 400i)] = select(0f, _e810, _e684);
        shared_f32_[(_e908 + 408i)] = select(0f, _e816, _e685);
        shared_f32_[(_e908 + 416i)] = select(0f, _e822, _e686);
        shared_f32_[(_e908 + 424i)] = select(0f, _e828, _e687);
        shared_f32_[(_e908 + 432i)] = select(0f, _e834, _e688);
        shared_f32_[(_e908 + 440i)] = select(0f, _e840, _e689);
        shared_f32_[(_e908 + 448i)] = select(0f, _e846, _e690);
        shared_f32_[(_e908 + 456i)] = select(0f, _e852, _e691);
        shared_f32_[(_e908 + 464i)] = select(0f, _e858, _e692);
        shared_f32_[(_e908 + 472i)] = select(0f, _e864, _e693);
        shared_f32_[(_e908 + 480i)] = select(0f, _e870, _e694);
        shared_f32_[(_e908 + 488i)] = select(0f, _e876, _e695);
        shared_f32_[(_e908 + 496i)] = select(0f, _e882, _e696);
        shared_f32_[(_e908 + 504i)] = select(0f, _e888, _e697);
        workgroupBarrier();
        local_33 = 0i;
        local_34 = _e103;
        local_35 = _e105;
        local_36 = _e107;
        local_37 = _e109;
        local_38 = _e111;
        local_39 = _e113;
        local_40 = _e115;
        local_41 = _e117;
        local_42 = _e119;
        local_43 = _e121;
        local_44 = _e123;
        local_45 = _e125;
        local_46 = _e127;
        local_47 = _e129;
        local_48 = _e131;
        local_49 = _e133;
        local_50 = _e135;
        local_51 = _e137;
        local_52 = _e139;
        local_53 = _e141;
        local_54 = _e143;
        local_55 = _e145;
        local_56 = _e147;
        local_57 = _e149;
        local_58 = _e151;
        local_59 = _e153;
        local_60 = _e155;
        local_61 = _e157;
        local_62 = _e159;
        local_63 = _e161;
        local_64 = _e163;
        local_65 = _e165;
        loop {
            let _e1214 = local_33;
            if !(select((_e1214 > 16i), (_e1214 < 16i), (1i > 0i))) {
                break;
            }
            let _e1222 = local_34;
            let _e1224 = local_35;
            let _e1226 = local_36;
            let _e1228 = local_37;
            let _e1230 = local_38;
            let _e1232 = local_39;
            let _e1234 = local_40;
            let _e1236 = local_41;
            let _e1238 = local_42;
            let _e1240 = local_43;
            let _e1242 = local_44;
            let _e1244 = local_45;
            let _e1246 = local_46;
            let _e1248 = local_47;
            let _e1250 = local_48;
            let _e1252 = local_49;
            let _e1254 = local_50;
            let _e1256 = local_51;
            let _e1258 = local_52;
            let _e1260 = local_53;
            let _e1262 = local_54;
            let _e1264 = local_55;
            let _e1266 = local_56;
            let _e1268 = local_57;
            let _e1270 = local_58;
            let _e1272 = local_59;
            let _e1274 = local_60;
            let _e1276 = local_61;
            let _e1278 = local_62;
            let _e1280 = local_63;
            let _e1282 = local_64;
            let _e1284 = local_65;
            let _e1286 = ((((_e25 >> u32(2i)) & 1i) * 16i) + _e1214);
            let _e1287 = ((((_e25 >> u32(0i)) & 3i) * 4i) + (_e1214 * 16i));
            let _e1290 = shared_f32_[_e1286];
            let _e1295 = shared_f32_[(_e1286 + 32i)];
            let _e1300 = shared_f32_[(_e1286 + 64i)];
            let _e1305 = shared_f32_[(_e1286 + 96i)];
            let _e1310 = shared_f32_[(_e1286 + 128i)];
            let _e1315 = shared_f32_[(_e1286 + 160i)];
            let _e1320 = shared_f32_[(_e1286 + 192i)];
            let _e1325 = shared_f32_[(_e1286 + 224i)];
            let _e1330 = shared_f32_[(_e1287 + 256i)];
            let _e1335 = shared_f32_[(_e1287 + 257i)];
            let _e1340 = shared_f32_[(_e1287 + 258i)];
            let _e1345 = shared_f32_[(_e1287 + 259i)];
            local_34 = fma(_e1290, _e1330, _e1222);
            local_35 = fma(_e1290, _e1335, _e1224);
            local_36 = fma(_e1290, _e1340, _e1226);
            local_37 = fma(_e1290, _e1345, _e1228);
            local_38 = fma(_e1295, _e1330, _e1230);
            local_39 = fma(_e1295, _e1335, _e1232);
            local_40 = fma(_e1295, _e1340, _e1234);
            local_41 = fma(_e1295, _e1345, _e1236);
            local_42 = fma(_e1300, _e1330, _e1238);
            local_43 = fma(_e1300, _e1335, _e1240);
            local_44 = fma(_e1300, _e1340, _e1242);
            local_45 = fma(_e1300, _e1345, _e1244);
            local_46 = fma(_e1305, _e1330, _e1246);
            local_47 = fma(_e1305, _e1335, _e1248);
            local_48 = fma(_e1305, _e1340, _e1250);
            local_49 = fma(_e1305, _e1345, _e1252);
            local_50 = fma(_e1310, _e1330, _e1254);
            local_51 = fma(_e1310, _e1335, _e1256);
            local_52 = fma(_e1310, _e1340, _e1258);
            local_53 = fma(_e1310, _e1345, _e1260);
            local_54 = fma(_e1315, _e1330, _e1262);
            local_55 = fma(_e1315, _e1335, _e1264);
            local_56 = fma(_e1315, _e1340, _e1266);
            local_57 = fma(_e1315, _e1345, _e1268);
            local_58 = fma(_e1320, _e1330, _e1270);
            local_59 = fma(_e1320, _e1335, _e1272);
            local_60 = fma(_e1320, _e1340, _e1274);
            local_61 = fma(_e1320, _e1345, _e1276);
            local_62 = fma(_e1325, _e1330, _e1278);
            local_63 = fma(_e1325, _e1335, _e1280);
            local_64 = fma(_e1325, _e1340, _e1282);
            local_65 = fma(_e1325, _e1345, _e1284);
            let _e1411 = local_33;
            local_33 = (_e1411 + 1i);
        }
        let _e1415 = local_34;
        let _e1417 = local_35;
        let _e1419 = local_36;
        let _e1421 = local_37;
        let _e1423 = local_38;
        let _e1425 = local_39;
        let _e1427 = local_40;
        let _e1429 = local_41;
        let _e1431 = local_42;
        let _e1433 = local_43;
        let _e1435 = local_44;
        let _e1437 = local_45;
        let _e1439 = local_46;
        let _e1441 = local_47;
        let _e1443 = local_48;
        let _e1445 = local_49;
        let _e1447 = local_50;
        let _e1449 = local_51;
        let _e1451 = local_52;
        let _e1453 = local_53;
        let _e1455 = local_54;
        let _e1457 = local_55;
        let _e1459 = local_56;
        let _e1461 = local_57;
        let _e1463 = local_58;
        let _e1465 = local_59;
        let _e1467 = local_60;
        let _e1469 = local_61;
        let _e1471 = local_62;
        let _e1473 = local_63;
        let _e1475 = local_64;
        let _e1477 = local_65;
        local_1 = _e1415;
        local_2 = _e1417;
        local_3 = _e1419;
        local_4 = _e1421;
        local_5 = _e1423;
        local_6 = _e1425;
        local_7 = _e1427;
        local_8 = _e1429;
        local_9 = _e1431;
        local_10 = _e1433;
        local_11 = _e1435;
        local_12 = _e1437;
        local_13 = _e1439;
        local_14 = _e1441;
        local_15 = _e1443;
        local_16 = _e1445;
        local_17 = _e1447;
        local_18 = _e1449;
        local_19 = _e1451;
        local_20 = _e1453;
        local_21 = _e1455;
        local_22 = _e1457;
        local_23 = _e1459;
        local_24 = _e1461;
        local_25 = _e1463;
        local_26 = _e1465;
        local_27 = _e1467;
        local_28 = _e1469;
        local_29 = _e1471;
        local_30 = _e1473;
        local_31 = _e1475;
        local_32 = _e1477;
        let _e1511 = local;
        local = (_e1511 + 1i);
    }
    let _e1515 = local_1;
    let _e1517 = local_2;
    let _e1519 = local_3;
    let _e1521 = local_4;
    let _e1523 = local_5;
    let _e1525 = local_6;
    let _e1527 = local_7;
    let _e1529 = local_8;
    let _e1531 = local_9;
    let _e1533 = local_10;
    let _e1535 = local_11;
    let _e1537 = local_12;
    let _e1539 = local_13;
    let _e1541 = local_14;
    let _e1543 = local_15;
    let _e1545 = local_16;
    let _e1547 = local_17;
    let _e1549 = local_18;
    let _e1551 = local_19;
    let _e1553 = local_20;
    let _e1555 = local_21;
    let _e1557 = local_22;
    let _e1559 = local_23;
    let _e1561 = local_24;
    let _e1563 = local_25;
    let _e1565 = local_26;
    let _e1567 = local_27;
    let _e1569 = local_28;
    let _e1571 = local_29;
    let _e1573 = local_30;
    let _e1575 = local_31;
    let _e1577 = local_32;
    let _e1582 = ((_e25 >> u32(2i)) & 1i);
    let _e1617 = (_e51 + ((0i + _e1582) + 0i));
    let _e1618 = (_e51 + ((2i + _e1582) + 0i));
    let _e1619 = (_e51 + ((4i + _e1582) + 0i));
    let _e1620 = (_e51 + ((6i + _e1582) + 0i));
    let _e1621 = (_e51 + ((8i + _e1582) + 0i));
    let _e1622 = (_e51 + ((10i + _e1582) + 0i));
    let _e1623 = (_e51 + ((12i + _e1582) + 0i));
    let _e1624 = (_e51 + ((14i + _e1582) + 0i));
    let _e1625 = (_e1617 * _e15);
    let _e1629 = (_e1618 * _e15);
    let _e1633 = (_e1619 * _e15);
    let _e1637 = (_e1620 * _e15);
    let _e1641 = (_e1621 * _e15);
    let _e1645 = (_e1622 * _e15);
    let _e1649 = (_e1623 * _e15);
    let _e1653 = (_e1624 * _e15);
    let _e1663 = (((_e25 >> u32(0i)) & 3i) * 4i);
    let _e1684 = (_e53 + ((0i + _e1663) + 0i));
    let _e1685 = (_e53 + ((1i + _e1663) + 0i));
    let _e1686 = (_e53 + ((2i + _e1663) + 0i));
    let _e1687 = (_e53 + ((3i + _e1663) + 0i));
    let _e1720 = (_e1617 < _e13);
    let _e1724 = (_e1618 < _e13);
    let _e1728 = (_e1619 < _e13);
    let _e1732 = (_e1620 < _e13);
    let _e1736 = (_e1621 < _e13);
    let _e1740 = (_e1622 < _e13);
    let _e1744 = (_e1623 < _e13);
    let _e1748 = (_e1624 < _e13);
    let _e1752 = (_e1684 < _e15);
    let _e1753 = (_e1685 < _e15);
    let _e1754 = (_e1686 < _e15);
    let _e1755 = (_e1687 < _e15);
    if (_e1720 && _e1752) {
        c[(_e1625 + _e1684)] = _e1515;
    }
    if (_e1720 && _e1753) {
        c[(_e1625 + _e1685)] = _e1517;
    }
    if (_e1720 && _e1754) {
        c[(_e1625 + _e1686)] = _e1519;
    }
    if (_e1720 && _e1755) {
        c[(_e1625 + _e1687)] = _e1521;
    }
    if (_e1724 && _e1752) {
        c[(_e1629 + _e1684)] = _e1523;
    }
    if (_e1724 && _e1753) {
        c[(_e1629 + _e1685)] = _e1525;
    }
    if (_e1724 && _e1754) {
        c[(_e1629 + _e1686)] = _e1527;
    }
    if (_e1724 && _e1755) {
        c[(_e1629 + _e1687)] = _e1529;
    }
    if (_e1728 && _e1752) {
        c[(_e1633 + _e1684)] = _e1531;
    }
    if (_e1728 && _e1753) {
        c[(_e1633 + _e1685)] = _e1533;
    }
    if (_e1728 && _e1754) {
        c[(_e1633 + _e1686)] = _e1535;
    }
    if (_e1728 && _e1755) {
        c[(_e1633 + _e1687)] = _e1537;
    }
    if (_e1732 && _e1752) {
        c[(_e1637 + _e1684)] = _e1539;
    }
    if (_e1732 && _e1753) {
        c[(_e1637 + _e1685)] = _e1541;
    }
    if (_e1732 && _e1754) {
        c[(_e1637 + _e1686)] = _e1543;
    }
    if (_e1732 && _e1755) {
        c[(_e1637 + _e1687)] = _e1545;
    }
    if (_e1736 && _e1752) {
        c[(_e1641 + _e1684)] = _e1547;
    }
    if (_e1736 && _e1753) {
        c[(_e1641 + _e1685)] = _e1549;
    }
    if (_e1736 && _e1754) {
        c[(_e1641 + _e1686)] = _e1551;
    }
    if (_e1736 && _e1755) {
        c[(_e1641 + _e1687)] = _e1553;
    }
    if (_e1740 && _e1752) {
        c[(_e1645 + _e1684)] = _e1555;
    }
    if (_e1740 && _e1753) {
        c[(_e1645 + _e1685)] = _e1557;
    }
    if (_e1740 && _e1754) {
        c[(_e1645 + _e1686)] = _e1559;
    }
    if (_e1740 && _e1755) {
        c[(_e1645 + _e1687)] = _e1561;
    }
    if (_e1744 && _e1752) {
        c[(_e1649 + _e1684)] = _e1563;
    }
    if (_e1744 && _e1753) {
        c[(_e1649 + _e1685)] = _e1565;
    }
    if (_e1744 && _e1754) {
        c[(_e1649 + _e1686)] = _e1567;
    }
    if (_e1744 && _e1755) {
        c[(_e1649 + _e1687)] = _e1569;
    }
    if (_e1748 && _e1752) {
        c[(_e1653 + _e1684)] = _e1571;
    }
    if (_e1748 && _e1753) {
        c[(_e1653 + _e1685)] = _e1573;
    }
    if (_e1748 && _e1754) {
        c[(_e1653 + _e1686)] = _e1575;
    }
    if (_e1748 && _e1755) {
        c[(_e1653 + _e1687)] = _e1577;
    }
}
