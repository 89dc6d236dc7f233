#!/usr/bin/env bash
# Builds the naga path for the web (wasm32-unknown-unknown): tilekit-core (IR, builder, verifier,
# text form, interpreter), tilekit-naga (the naga emitter, WGSL) and the tilekit library without
# its runtimes (the kernel library's builders); no Vulkan, no LLVM. Then tilekit-web (web/), the
# wasm-bindgen module that writes a library kernel's WGSL and runs it on the interpreter, its JS
# bindings for Node and for browsers, and a check of vector_add under Node.
#
# rustup's wasm32 standard library cannot be downloaded on machines that reach no rustup server,
# so this builds std itself: Debian's rustc-web toolchain (1.96, /usr/bin/rustc and /usr/bin/cargo)
# with std's source (rust-web-src) and cargo's `-Z build-std` (RUSTC_BOOTSTRAP=1 allows the
# unstable flag on a stable compiler). rust-web-llvm and lld-22 give rust-lld, the wasm linker.
# std's own dependencies (compiler_builtins, dlmalloc, ...) come from crates.io like any crate's.
#
# The artifacts land under ${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release, the
# bindings in its tilekit-web/node and tilekit-web/web.
# TILEKIT_NO_INSTALL=1 installs nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

APT_PACKAGES=(
  rustc-web     # rustc 1.96 at /usr/bin/rustc, with every wasm32 target built in
  cargo-web     # its cargo, at /usr/bin/cargo
  rust-web-src  # std's source (/usr/lib/rustlib/src/rust), which -Z build-std compiles
  rust-web-llvm # rust-lld (-> lld-22): rustc's default linker for wasm32-unknown-unknown
  lld-22        # the lld that rust-lld points at
)
[ "${TILEKIT_NO_INSTALL:-0}" = 1 ] || install_apt "${APT_PACKAGES[@]}"

# Debian's toolchain by path: a rustup toolchain earlier on PATH has no wasm32 std here.
export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
CARGO=/usr/bin/cargo
[ -x "$RUSTC" ] && [ -x "$CARGO" ] || die "Debian's rustc-web toolchain is missing ($RUSTC, $CARGO)"
[ -d "$("$RUSTC" --print sysroot)/lib/rustlib/src/rust/library" ] || die "std's source is missing (rust-web-src)"
export RUSTC_BOOTSTRAP=1
log "$("$CARGO" --version), $("$RUSTC" --version)"

TARGET=wasm32-unknown-unknown
log "building tilekit-core, tilekit-naga, tilekit (no runtimes) and tilekit-web for $TARGET"
start=$SECONDS
"$CARGO" build --locked --release --target "$TARGET" -Z build-std=std,panic_abort \
  -p tilekit-core -p tilekit-naga -p tilekit -p tilekit-web --no-default-features
release="${CARGO_TARGET_DIR:-target}/$TARGET/release"
log "built in $((SECONDS - start)) s: $release"

# wasm-bindgen's command must be the version of the crate in Cargo.lock. It is built with the
# machine's own (rustup) cargo, from crates.io, once; not --locked: the CLI's lock file names a
# webpki-roots release that some crates.io mirrors lack.
bindgen_version="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print }' Cargo.lock)"
[ -n "$bindgen_version" ] || die "no wasm-bindgen in Cargo.lock"
ensure_cargo
bindgen="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin/wasm-bindgen"
if [ "$("$bindgen" --version 2>/dev/null)" != "wasm-bindgen $bindgen_version" ]; then
  [ "${TILEKIT_NO_INSTALL:-0}" = 1 ] && die "wasm-bindgen $bindgen_version is not installed ($bindgen)"
  log "installing wasm-bindgen-cli $bindgen_version"
  CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/wasm-bindgen-cli" \
    cargo install --force wasm-bindgen-cli --version "$bindgen_version"
fi

# The JS bindings, for Node (web/check.cjs below) and for a browser page (ES module).
pkg="$release/tilekit-web"
"$bindgen" --target nodejs --out-dir "$pkg/node" "$release/tilekit_web.wasm"
"$bindgen" --target web --out-dir "$pkg/web" "$release/tilekit_web.wasm"
log "bindings: $pkg/node, $pkg/web ($(du -k "$pkg/web/tilekit_web_bg.wasm" | cut -f1) KiB of wasm)"

command -v node >/dev/null 2>&1 || install_apt nodejs
log "vector_add on Node: WGSL and the interpreter against the f64 reference"
node web/check.cjs "$pkg/node" vector_add 1000

# The same in a browser when Chromium is there: web/index.html next to the web bindings, run by
# headless Chromium through web/serve.py (which serves it on localhost and waits for its report).
# On a machine without a GPU, Chromium's WebGPU falls back to SwiftShader (Vulkan on the CPU)
# once --enable-unsafe-webgpu is given; the page compiles the WGSL there, dispatches it on the
# interpreter's inputs and wants the interpreter's output, bit for bit.
command -v chromium >/dev/null 2>&1 || [ "${TILEKIT_NO_INSTALL:-0}" = 1 ] || install_apt chromium
chromium="$(command -v chromium || true)"
if [ -z "$chromium" ]; then
  log "SKIPPED: the browser check (no chromium on PATH and TILEKIT_NO_INSTALL=1)"
  exit 0
fi
cp web/index.html "$pkg/web/index.html"
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
# vector add bit for bit (one rounding either way); softmax (a row reduction through shared
# memory, -inf masking) and a tiled matmul within the page's tolerance of the interpreter.
for page in "kernel=vector_add&shape=100000&exact=1" "kernel=softmax&shape=37x1000" "kernel=matmul&shape=67x45x33"; do
  log "headless Chromium ($("$chromium" --version 2>/dev/null)), WebGPU on SwiftShader: $page"
  # --no-sandbox: Chromium refuses to run as root with its sandbox.
  python3 web/serve.py "$pkg/web" "index.html?$page" 120 \
    "$chromium" --headless=new --no-sandbox --no-first-run --user-data-dir="$profile" --enable-unsafe-webgpu \
    || die "the browser check failed: $page"
done
