#!/usr/bin/env bash
# Builds the binaries scripts/gpu-run.sh runs on a GPU machine (x86-64, glibc >= Debian 12's)
# and packs them, stripped and xz-compressed, into .h200/; downloads the Vulkan loader packages
# into .gl/. Both folders are for carrying, not for committing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The commit is compiled in: the GPU machine gets no .git to ask.
export TILEKIT_COMMIT="$(git rev-parse HEAD)$(git diff --quiet HEAD || echo -dirty)"
cargo build --release --bins --benches
cargo test --release --workspace --no-run
rm -rf .h200 && mkdir .h200
newest() { ls -t target/release/deps/"$1"-* | grep -v '\.d$' | head -1; }
cp target/release/tilekit .h200/tilekit
cp "$(newest gpu)" .h200/gpu
for t in kernels_vulkan control ops runtime wgpu_rt; do cp "$(newest "$t")" ".h200/$t"; done
strip .h200/*
xz -T2 -6 .h200/*
if [ ! -d .gl ] || [ -z "$(ls .gl 2>/dev/null)" ]; then
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  mkdir -p .gl /tmp/amd64/partial
  apt-get $o update -qq
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
du -sh .h200 .gl
