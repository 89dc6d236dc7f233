#!/usr/bin/env bash
# Builds the binaries scripts/gpu-run.sh runs on a GPU machine (x86-64, glibc >= Debian 12's)
# and packs them, stripped and xz-compressed, into .h200/; downloads the Vulkan loader packages
# into .gl/. Both folders are for carrying, not for committing.
#
# The GPU machine has no LLVM 19, so everything that includes the PTX backend is linked with LLVM
# statically (feature `ptx-static`, in its own target directory so the normal build is not
# rebuilt): the `tilekit` binary and the benchmarks (package tilekit-cli), the kernels_cuda test and
# the others below (`compile` times
# compilation on the GPU machine's processors too). libdevice (the CUDA
# math library the PTX backend links) travels beside them; the binaries find it next to themselves.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh
# LLVM's static libraries: llvm-sys links Polly's too, which llvm-19-dev does not bring.
install_apt llvm-19-dev libzstd-dev libpolly-19-dev
# The commit is compiled in: the GPU machine gets no .git to ask.
export TILEKIT_COMMIT="$(git rev-parse HEAD)$(git diff --quiet HEAD || echo -dirty)"
cargo test --release --workspace --no-run
STATIC=target/ptx-static
CARGO_TARGET_DIR=$STATIC cargo build --release -p tilekit-cli --features ptx-static --bin tilekit --bench gpu --bench compile
# kernels_cuda, semantics, checked, accuracy, launch_api, builder_ops and tune test the library
# (tilekit); fuzz the fuzzer (tilekit-cli).
CARGO_TARGET_DIR=$STATIC cargo test --release -p tilekit -p tilekit-cli --features ptx-static --test kernels_cuda --test semantics --test checked \
  --test accuracy --test launch_api --test builder_ops --test tune --test fuzz --no-run
rm -rf .h200 && mkdir .h200
newest() { ls -t "$1"/release/deps/"$2"-* | grep -v '\.d$' | head -1; }
cp $STATIC/release/tilekit .h200/tilekit
cp "$(newest $STATIC gpu)" .h200/gpu
cp "$(newest $STATIC compile)" .h200/compile
cp "$(newest $STATIC kernels_cuda)" .h200/kernels_cuda
# Semantics and checked launches on every device there, CUDA included.
cp "$(newest $STATIC semantics)" .h200/semantics
cp "$(newest $STATIC checked)" .h200/checked
# Accuracy bounds, the launch API, the builder's ops and the tuner, with CUDA present.
for t in accuracy launch_api builder_ops tune; do cp "$(newest $STATIC $t)" ".h200/$t"; done
# The fuzzer's saved cases and budgets (TILEKIT_FUZZ_CASES points the test at the cases).
cp "$(newest $STATIC fuzz)" .h200/fuzz
tar -cf .h200/fuzz-cases.tar -C cli/tests fuzz
for t in kernels_vulkan control ops runtime wgpu_rt grid_fold; do cp "$(newest "${CARGO_TARGET_DIR:-target}" "$t")" ".h200/$t"; done
strip .h200/tilekit .h200/gpu .h200/compile .h200/kernels_cuda .h200/semantics .h200/checked .h200/fuzz .h200/accuracy .h200/launch_api .h200/builder_ops .h200/tune .h200/kernels_vulkan .h200/control .h200/ops .h200/runtime .h200/wgpu_rt .h200/grid_fold
libdevice=$(python3 -c 'import nvidia.cuda_nvcc as m; print(m.__path__[0])')/nvvm/libdevice/libdevice.10.bc
cp "$libdevice" .h200/libdevice.10.bc
# Statically linked LLVM still needs libffi and libzstd at run time; carry Debian 12's.
cp /lib/x86_64-linux-gnu/libffi.so.8 /lib/x86_64-linux-gnu/libzstd.so.1 .h200/
xz -T2 -6 .h200/*
if [ ! -d .gl ] || [ -z "$(ls .gl 2>/dev/null)" ]; then
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  mkdir -p .gl /tmp/amd64/partial
  apt-get $o update -qq
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
du -sh .h200 .gl
