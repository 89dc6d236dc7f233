#!/usr/bin/env bash
# Builds tilekit in release mode and runs every kernel of the library on the interpreter, checking
# each output against its f64 reference. Without arguments each kernel runs its test problems
# (the default problems are sized for GPUs; the interpreter would take many minutes on them);
# arguments replace that and go to `tilekit run --all`, e.g. `--problems default` or
# `--problems tests --all-dtypes`.
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
log "running the kernel library on the interpreter"
[ $# -eq 0 ] && set -- --problems tests
exec ./target/release/tilekit run --all --device interpreter "$@"
