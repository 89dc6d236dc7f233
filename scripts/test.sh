#!/usr/bin/env bash
# Installs what tilekit's tests need on a Debian 12 machine that has a Rust toolchain, checks the
# formatting (rustfmt) and lints (clippy, with and without the LLVM backends), builds every target
# in release mode (the interpreter tests run much faster optimised) and runs every test. Tests that
# could not run something here (no CUDA device, say) print `SKIPPED: <test> (<reason>)`; the
# script lists those lines at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

# Everything the tests need beyond Rust, in one place: Debian packages, then Python packages.
# Both lists are installed only where missing.
APT_PACKAGES=(
  mesa-vulkan-drivers     # lavapipe: a Vulkan 1.3 device on the CPU
  libvulkan1              # the Vulkan loader
  vulkan-validationlayers # VK_LAYER_KHRONOS_validation: every GPU test fails on any message
  spirv-tools             # spirv-val checks every emitted module
  llvm-19-dev             # the PTX and AMDGCN backends (features `ptx`, `amdgcn`) build against LLVM 19
  lld-19                  # ld.lld-19 links AMDGCN objects into code objects (llvm-objdump-19 comes with llvm-19)
  libzstd-dev             # LLVM's static libraries need it (scripts/gpu-pack.sh links LLVM statically)
  chromium                # headless: the HTML report renders (tests/report_html.rs)
)
PIP_PACKAGES=(
  nvidia-cuda-nvcc-cu12==12.9.86  # ptxas (checks every kernel's PTX) and libdevice (math)
)

ensure_cargo
install_apt "${APT_PACKAGES[@]}"
install_pip "${PIP_PACKAGES[@]}"

log "formatting (cargo fmt --check)"
cargo fmt --all -- --check
log "lints (clippy; then with the ptx and amdgcn features; then the library with each runtime alone)"
cargo clippy --release --workspace --all-targets -- -D warnings
cargo clippy --release --workspace --all-targets --features ptx,amdgcn -- -D warnings
# An application chooses its runtimes (tilekit's features `vulkan` and `wgpu`, both default):
# the library must build, lint-free, with none, either or both.
for runtimes in "" vulkan wgpu; do
  cargo clippy --release -p tilekit -p tilekit-spirv --no-default-features ${runtimes:+--features "$runtimes"} --lib -- -D warnings
done

log "building every target (release)"
cargo build --release --workspace --all-targets

# The Vulkan tests run with the Khronos validation layer and fail on any message it reports.
export TILEKIT_VULKAN_VALIDATION=1
# lavapipe warns on every device creation when this is unset.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

# Every test's output also goes to a log, for the list of skipped tests at the end.
test_log=$(mktemp)
trap 'rm -f "$test_log"' EXIT
skipped_summary() {
  # A line may follow the harness's `test name ... ` on the same line.
  local lines
  lines=$({ grep -o 'SKIPPED: .*' "$test_log" || true; } | sort -u)
  if [ -z "$lines" ]; then
    log "no test was skipped"
  else
    log "$(printf '%s\n' "$lines" | wc -l) skipped:"
    printf '%s\n' "$lines" | sed 's/^/  /'
  fi
}

# Unit, integration and binary tests, then the documentation examples, each once. The workspace
# includes examples/app, whose test checks with `cargo tree` that an application depending on
# tilekit gets none of the command line's crates.
log "tests"
cargo test --release --workspace --lib --bins --tests --examples 2>&1 | tee -a "$test_log"
# The library's own tests without its default runtimes: a device it cannot run names the feature.
cargo test --release -p tilekit --no-default-features --lib 2>&1 | tee -a "$test_log"
log "documentation tests"
cargo test --release --workspace --doc 2>&1 | tee -a "$test_log"
# The API documentation builds without a broken or ambiguous link.
RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps --workspace

# The PTX backend (its crates' own tests ran above, as workspace members): every kernel's PTX
# through ptxas, golden PTX, `ir --ptx`, and the CUDA kernel tests, which say that there is no
# CUDA device and pass where there is none.
# The AMDGCN backend in the same build (compile-only): every kernel's code object for gfx90a,
# gfx942 and gfx1100 linked, disassembled and its metadata checked, golden assembly, `ir --amdgcn`.
# tests/accuracy.rs again, for each math op's PTX through ptxas and its AMDGCN code object.
log "PTX and AMDGCN backend tests (features ptx, amdgcn)"
# The library's tests (tilekit) and the command line's (tilekit-cli), both with the features.
TILEKIT_SKIP_GPU_TESTS=1 cargo test --release -p tilekit -p tilekit-cli --features ptx,amdgcn \
  --test ptx_modules --test amdgcn_modules --test kernels_cuda --test cli --test bench_cli --test checked --test accuracy 2>&1 | tee -a "$test_log"

# The naga path for the web: tilekit-core, tilekit-naga and the library without runtimes built
# for wasm32 (Debian's rustc-web with -Z build-std), the wasm-bindgen module checked under Node,
# and vector add, softmax and matmul dispatched through WebGPU in headless Chromium (SwiftShader)
# against the interpreter compiled to wasm. Its own target directory: another compiler.
log "the naga path in wasm32 and in a browser (scripts/wasm.sh)"
CARGO_TARGET_DIR="$PWD/target/wasm" bash scripts/wasm.sh 2>&1 | tee -a "$test_log"
skipped_summary
