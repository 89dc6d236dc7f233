//! Shared by the tests that validate emitted SPIR-V.

/// SPIRV-Tools v2025.3's validator (the `spirv-tools` crate, built with the tests) accepts
/// `words` for Vulkan 1.3, and so does the system's `spirv-val --target-env vulkan1.3` where
/// the module has no cooperative matrices, which that one (Debian's v2023.1) does not know.
/// `what` names the module in the failure; `TILEKIT_SKIP_SPIRV_VAL=1` skips the system's check
/// where spirv-tools is missing.
#[allow(dead_code)] // each test binary uses one of the two
pub fn spirv_val(words: &[u32], what: &str) {
    use spirv_tools::val::Validator;
    let validator = spirv_tools::val::create(Some(spirv_tools::TargetEnv::Vulkan_1_3));
    if let Err(e) = validator.validate(words, None) {
        panic!("{what}: SPIRV-Tools v2025.3 rejects the module: {e}");
    }
    // OpCapability CooperativeMatrixKHR (6022): two words, opcode 17.
    let coop = words.windows(2).any(|w| w == [2 << 16 | 17, 6022]);
    if !coop {
        system_spirv_val(words, what);
    }
}

/// The system's `spirv-val` alone, for SPIR-V that naga writes (the naga path's modules):
/// naga decorates workgroup arrays with an ArrayStride, which SPIRV-Tools v2025.3 refuses
/// (VUID-StandaloneSpirv-None-10684) and Debian's validator and the drivers accept.
#[allow(dead_code)] // each test binary uses one of the two
pub fn system_spirv_val(words: &[u32], what: &str) {
    if std::env::var("TILEKIT_SKIP_SPIRV_VAL").is_ok_and(|v| v == "1") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tilekit-spirv-val-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.spv", what.replace(|c: char| !c.is_ascii_alphanumeric(), "_")));
    let mut f = std::fs::File::create(&path).unwrap();
    std::io::Write::write_all(&mut f, &words.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    drop(f);
    let out = std::process::Command::new("spirv-val")
        .args(["--target-env", "vulkan1.3"])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run spirv-val ({e}): install spirv-tools, or set TILEKIT_SKIP_SPIRV_VAL=1"));
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{what}: spirv-val rejects the module:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
