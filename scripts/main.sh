#!/usr/bin/env bash
# The benchmark and its report on whatever this machine has: builds tilekit in release mode,
# installs lavapipe (Mesa's Vulkan driver on the CPU) where missing, runs `tilekit bench` (the
# quick suite unless arguments say otherwise, e.g. `--suite default`) on the interpreter and
# every Vulkan device through both runtimes, then `tilekit report` over every results file in
# bench/results (bench-*.json, from any machine) into bench/results/report/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

# What running the benchmark needs beyond Rust, installed only where missing.
APT_PACKAGES=(
  mesa-vulkan-drivers # lavapipe: a Vulkan device on the CPU
  libvulkan1          # the Vulkan loader
)

ensure_cargo
install_apt "${APT_PACKAGES[@]}"
# lavapipe warns on every device creation when this is unset.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

log "building (release)"
cargo build --release --bin tilekit
[ $# -eq 0 ] && set -- --suite quick
suite=quick
for ((i = 1; i <= $#; i++)); do
  if [ "${!i}" = "--suite" ] && [ "$i" -lt $# ]; then j=$((i + 1)); suite="${!j}"; fi
done
results="bench/results/bench-$(hostname)-${suite}.json"
log "benchmark: tilekit bench $* -o $results"
status=0
./target/release/tilekit bench "$@" -o "$results" || status=$?
# TILEKIT_PLATFORMS names the performance-portability platform set (comma-separated ids or
# prefixes; default: every platform, which leaves only the problems all of them ran).
log "report of bench/results/bench-*.json"
./target/release/tilekit report bench/results/bench-*.json -o bench/results/report \
  ${TILEKIT_PLATFORMS:+--platforms "$TILEKIT_PLATFORMS"} ${TILEKIT_SET_NAME:+--set-name "$TILEKIT_SET_NAME"}
exit "$status"
