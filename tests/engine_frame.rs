//! The engine example (examples/engine.rs): a wgpu frame that renders a scene, builds its
//! luminance histogram and prefix sum with tilekit kernels recorded into the renderer's command
//! encoder on the renderer's buffers, and equalises the scene in a second render pass. Checked
//! against the same computation on the host, headless (lavapipe in CI).
#![cfg(feature = "wgpu")]

#[path = "../examples/engine.rs"]
mod engine;

#[test]
fn an_engine_frame_with_kernels_in_its_encoder_matches_the_host() {
    check_frame(false);
}

/// The same frame on a device opened without passthrough, the kernels as naga modules (the
/// path of Metal, DX12 and GL engines).
#[test]
fn an_engine_frame_through_naga_matches_the_host() {
    check_frame(true);
}

fn check_frame(naga: bool) {
    let frame = match engine::render(naga) {
        Ok(f) => f,
        Err(e) if std::env::var("TILEKIT_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") => {
            eprintln!("SKIPPED: the engine frame, naga {naga} ({e})");
            return;
        }
        Err(e) => panic!("the engine frame (naga {naga}) did not run: {e} (set TILEKIT_SKIP_GPU_TESTS=1 on a machine without Vulkan)"),
    };
    let (cdf, want) = engine::reference(&frame.scene);
    let pixels = (engine::SIZE * engine::SIZE) as i32;
    assert_eq!(frame.cdf, cdf, "the kernels' cumulative histogram (naga {naga})");
    assert_eq!(cdf[engine::BINS - 1], pixels);
    let diff = engine::largest_difference(&frame.equalised, &want);
    assert!(diff <= 1, "the equalised frame differs from the host's by up to {diff}");
    // The scene is dim; equalised, its luminance spans the range.
    let lum = |img: &[u8]| img.chunks_exact(4).map(|p| engine::luminance(p[0] as u32, p[1] as u32, p[2] as u32)).max().unwrap();
    assert!(lum(&frame.scene) < 128 && lum(&frame.equalised) > 240, "scene {} equalised {}", lum(&frame.scene), lum(&frame.equalised));
    // Nothing went through the host on tilekit's side: the kernels ran on the renderer's buffers.
    assert_eq!(frame.transfers, tilekit::Transfers::default(), "{:?}", frame.transfers);
}
