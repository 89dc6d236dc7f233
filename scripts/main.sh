#!/usr/bin/env bash
# The benchmark and its report on whatever this machine has: builds tilekit in release mode,
# installs lavapipe (Mesa's Vulkan driver on the CPU) where missing, runs `tilekit bench` (the
# quick suite unless arguments say otherwise, e.g. `--suite default`) on the interpreter and
# every Vulkan device through both runtimes, then `tilekit report` over this run's results.
#
# Nothing committed is written: the results go to a file of this run's own and the report to a
# folder of its own, both under bench/local/ (ignored by git; TILEKIT_RESULTS_DIR moves them),
# and `tilekit bench` refuses to replace an existing file. The report covers this run only, so
# its performance-portability set is the platforms that ran the same problems; to compare with
# other runs, name their results files in TILEKIT_COMPARE (read, never written) and the set in
# TILEKIT_PLATFORMS (comma-separated platform ids or prefixes) and TILEKIT_SET_NAME.
#
# TILEKIT_BIN uses a tilekit binary already built instead of building one; TILEKIT_NO_INSTALL=1
# installs nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

# What running the benchmark needs beyond Rust, installed only where missing.
APT_PACKAGES=(
  mesa-vulkan-drivers # lavapipe: a Vulkan device on the CPU
  libvulkan1          # the Vulkan loader
)

[ "${TILEKIT_NO_INSTALL:-0}" = 1 ] || install_apt "${APT_PACKAGES[@]}"
# lavapipe warns on every device creation when this is unset.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

tilekit="${TILEKIT_BIN:-}"
if [ -z "$tilekit" ]; then
  ensure_cargo
  log "building (release)"
  cargo build --release -p tilekit-cli --bin tilekit
  tilekit="${CARGO_TARGET_DIR:-target}/release/tilekit"
fi
[ $# -eq 0 ] && set -- --suite quick
suite=default
for ((i = 1; i <= $#; i++)); do
  if [ "${!i}" = "--suite" ] && [ "$i" -lt $# ]; then j=$((i + 1)); suite="${!j}"; fi
done
# A name of this run's own: the UTC time and the process id, never a committed file's name.
dir="${TILEKIT_RESULTS_DIR:-bench/local}"
run="$(hostname)-${suite}-$(date -u +%Y%m%dT%H%M%SZ)-$$"
results="$dir/bench-$run.json"
report="$dir/report-$run"
log "benchmark: tilekit bench $* -o $results"
status=0
"$tilekit" bench "$@" -o "$results" || status=$?
if [ ! -f "$results" ]; then
  exit "$status"
fi
# shellcheck disable=SC2086 # TILEKIT_COMPARE is a list of files
inputs=("$results" ${TILEKIT_COMPARE:-})
log "report of ${inputs[*]} -> $report"
"$tilekit" report "${inputs[@]}" -o "$report" \
  ${TILEKIT_PLATFORMS:+--platforms "$TILEKIT_PLATFORMS"} ${TILEKIT_SET_NAME:+--set-name "$TILEKIT_SET_NAME"}
exit "$status"
