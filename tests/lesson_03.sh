# Lesson 03_all_reduce, sourced by tests/run_tests.sh (needs tests/lib.sh).
#
# Small sizes keep every run short. The sweep 12K, 48K, 192K holds 3072,
# 12288 and 49152 floats, which 1, 2, 3 and 4 all divide, so the ring's
# formula 2(N-1)/N*S is a whole number and the counted bytes must equal it.
L03=./03_all_reduce/all_reduce
L03_SMALL=(--min-bytes 12K --max-bytes 192K --iters 2)
L03_S=196608 # the largest size of that sweep, in bytes

for np in 1 2 3 4; do
  ring=$((2 * (np - 1) * L03_S / np)) naive0=$(((np - 1) * L03_S)) other=$L03_S total=$((2 * (np - 1) * L03_S))
  [ "$np" = 1 ] && other=0
  check "lesson 03 np=$np" "$np" 0 \
    'CHECK PASSED: .* at 3 size\(s\), .*: 0 wrong .*: 0 mismatch' \
    "^ +$L03_S +49152 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +$ring +$ring +0$" \
    "^ +$L03_S +49152 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +$naive0 +$naive0 +0$" \
    "\[rank 0\] naive $naive0 \(\(N-1\)\*S = $naive0\) \| ring $ring \(2\(N-1\)/N\*S = $ring, from chunk sizes $ring\) \| library $ring \(model\)" \
    "\[rank $((np - 1))\] naive $other .*\| ring $ring " \
    "all ranks together: naive $total, ring $total, 2\(N-1\)\*S = $total" \
    -- "$L03" "${L03_SMALL[@]}"
done

# One rank: nothing to move or add; 03 says its times are then no bandwidth.
check "lesson 03 np=1 says its times are a call's overhead" 1 0 'CHECK PASSED' \
  "^note: one rank: an all-reduce in place has nothing to move or add, .* algbw is no bandwidth$" \
  -- "$L03" "${L03_SMALL[@]}"

# Counts that N does not divide: chunks differ by one element, some are empty
# when count < N. Rank r sends every chunk but r+1 (reduce-scatter) and every
# chunk but r+2 (all-gather), 4 bytes per element: for 1001 floats on 3 ranks
# (chunks 334 334 333) that is 5340 5340 5336 B, against 2(N-1)/N*S = 5338.67.
check "lesson 03 np=3 count 1001" 3 0 'CHECK PASSED: .* 0 wrong .*: 0 mismatch' \
  '^ +4004 +1001 .* +5340 +5338\.67 +0$' \
  '\[rank 0\] naive 8008 .*\| ring 5340 \(2\(N-1\)/N\*S = 5338\.666667, from chunk sizes 5340\)' \
  '\[rank 2\] naive 4004 \(S = 4004\) \| ring 5336 .*from chunk sizes 5336\)' \
  'all ranks together: naive 16016, ring 16016' -- "$L03" --count 1001 --iters 2
# ... in pieces of 16 floats, so the last piece of a chunk is short and ranks
# whose chunks are one element shorter send an empty piece.
check "lesson 03 np=3 count 1001 pieces of 64 B" 3 0 'CHECK PASSED: .* 0 wrong .*: 0 mismatch' \
  '\[rank 1\] .*ring 5340 ' -- "$L03" --count 1001 --iters 2 --segment 64
# 1001 floats on 4 ranks: chunks 251 250 250 250, so ranks send 6008 6008 6004 6004 B.
check "lesson 03 np=4 count 1001" 4 0 'CHECK PASSED: .* 0 wrong .*: 0 mismatch' \
  '\[rank 0\] naive 12012 .*\| ring 6008 \(2\(N-1\)/N\*S = 6006, from chunk sizes 6008\)' \
  '\[rank 2\] .*\| ring 6004 ' '\[rank 3\] .*\| ring 6004 ' -- "$L03" --count 1001 --iters 2
# One float on 4 ranks: only chunk 0 holds it. Ranks 0, 1 send it twice, 2, 3 once.
check "lesson 03 np=4 count 1" 4 0 'CHECK PASSED: .* 0 wrong .*: 0 mismatch' \
  '\[rank 1\] naive 4 \(S = 4\) \| ring 8 \(2\(N-1\)/N\*S = 6, from chunk sizes 8\)' \
  '\[rank 3\] .*\| ring 4 ' 'all ranks together: naive 24, ring 24' -- "$L03" --count 1 --iters 2
for np in 2 3; do
  check "lesson 03 np=$np count 3" "$np" 0 'CHECK PASSED: .* 0 wrong .*: 0 mismatch' \
    -- "$L03" --count 3 --iters 2
done
check "lesson 03 np=4 count 3 whole chunks" 4 0 'CHECK PASSED: .* 0 wrong .*: 0 mismatch' \
  -- "$L03" --count 3 --iters 2 --segment 0

# Bad input: one clear message, exit code 2, no hang.
check "lesson 03 unknown flag" 2 2 "unknown flag '--bogus'" -- "$L03" --bogus
check "lesson 03 bad byte count" 2 2 "--max-bytes: '1X' is not a byte count" -- "$L03" --max-bytes 1X
check "lesson 03 size not a multiple of 4" 2 2 '--min-bytes 6 is not a multiple of 4' \
  -- "$L03" --min-bytes 6
check "lesson 03 max below min" 2 2 '--max-bytes 64 is smaller than --min-bytes 128' \
  -- "$L03" --min-bytes 128 --max-bytes 64
check "lesson 03 --min-bytes 0" 2 2 '--min-bytes: 0 is out of range' -- "$L03" --min-bytes 0
check "lesson 03 --count -1" 2 2 '--count: -1 is out of range' -- "$L03" --count -1
check "lesson 03 --iters 0" 2 2 '--iters: 0 is out of range' -- "$L03" --iters 0
check "lesson 03 --help" 2 0 '--count N' '--segment BYTES' -- "$L03" --help
