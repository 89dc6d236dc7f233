#!/bin/bash
# Local A/B of the compile latency: the compile bench built before (o3 less slp) and at 9bdd7bf.
cd /work/main
for r in 1 2; do
  for v in old new; do
    /tmp/compile-$v --bench > /tmp/cmp/$v-$r.log 2>&1
    mv bench/results/compile-ptx-vm.json /tmp/cmp/compile-ptx-$v-$r.json
    mv bench/results/compile-vm.json /tmp/cmp/compile-spirv-$v-$r.json
    git checkout -q bench/results/compile-ptx-vm.json bench/results/compile-vm.json
  done
done
echo done > /tmp/cmp/done
