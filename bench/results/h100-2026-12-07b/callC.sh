# Call C: semantics with 4 test threads, the build of 4ebcdac (crashed 3 of 4 runs) against the same with Vulkan devices enumerated once per process.
which gdb 2>&1 | head -1
for i in 1 2 3 4; do
  for b in old new; do
    timeout 50 $bin/semantics_$b --test-threads 4 > $OUT/sem-$b-$i.txt 2>&1; rc=$?
    echo "$b run $i rc=$rc ok=$(grep -c '\.\.\. ok' $OUT/sem-$b-$i.txt) $(grep 'test result' $OUT/sem-$b-$i.txt)"
  done
done
