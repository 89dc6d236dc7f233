#!/usr/bin/env bash
# Installs what tilekit's tests need on a Debian 12 machine that has a Rust toolchain, builds every
# target in release mode (the interpreter tests run much faster optimised) and runs every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

# Everything the tests need beyond Rust, in one place: Debian packages, then Python packages.
# Both lists are installed only where missing.
APT_PACKAGES=(
)
PIP_PACKAGES=(
)

ensure_cargo
install_apt "${APT_PACKAGES[@]}"
install_pip "${PIP_PACKAGES[@]}"

log "building every target (release)"
cargo build --release --workspace --all-targets

# Unit, integration and binary tests, then the documentation examples, each once.
log "tests"
cargo test --release --workspace --lib --bins --tests --examples
log "documentation tests"
cargo test --release --workspace --doc
