#!/usr/bin/env bash
# Builds tilekit in release mode and runs every kernel of the library on the interpreter, checking
# each output against its f64 reference. Extra arguments go to `tilekit run`, e.g. --all-dtypes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

# What running the library needs beyond Rust (device drivers, as backends land), installed only
# where missing.
APT_PACKAGES=(
)

ensure_cargo
install_apt "${APT_PACKAGES[@]}"

log "building (release)"
cargo build --release --bin tilekit
log "running the kernel library"
exec ./target/release/tilekit run --all --device interpreter "$@"
