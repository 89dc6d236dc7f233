# commit 7aafdbc. Call E: the CUDA kernel tests and the checked launches with several test threads (after 98f1a9d).
c=7aafdbc
(timeout 110 $bin/kernels_cuda --test-threads 8 2>&1 | grep -v XDG_RUNTIME | tail -40; echo rc=${PIPESTATUS[0]}) > $OUT/kernels_cuda-t8-$c.txt; grep -E "test result|panicked|^rc=" $OUT/kernels_cuda-t8-$c.txt
for i in 1 2 3; do (timeout 25 $bin/checked --test-threads 4 2>&1 | grep -v XDG_RUNTIME | tail -40; echo rc=${PIPESTATUS[0]}) > $OUT/checked-t4-$i-$c.txt; grep -E "test result|panicked|^rc=" $OUT/checked-t4-$i-$c.txt; done
