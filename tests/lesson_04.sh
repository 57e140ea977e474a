# Lesson 04_sampler: DistributedSampler semantics, proved with an all-gather.
# Sourced by tests/run_tests.sh (check() comes from tests/lib.sh).
#
# The formulas, for n samples on N ranks:
#   num_samples = ceil(n/N) (floor(n/N) with --drop-last), total_size = num_samples*N,
#   padding = total_size - n (0 with --drop-last), dropped = n - total_size (--drop-last).
# Sizes 10, 3 (smaller than N at NP=4) and 7 (not divisible by 2, 3 or 4) at every NP.
S04=./04_sampler/sampler

# The summary rows a run must print for n on np ranks; $3 = 1 for --drop-last.
l04_rows() {
  local n=$1 np=$2 drop=$3 ns total pad dropped fn
  if [ "$drop" = 1 ]; then ns=$((n / np)); fn=floor; else ns=$(((n + np - 1) / np)); fn=ceil; fi
  total=$((ns * np))
  if [ "$drop" = 1 ]; then pad=0; dropped=$((n - total)); else pad=$((total - n)); dropped=0; fi
  L04_ROWS=(
    "formulas: num_samples = $fn\(n/N\) = $fn\($n/$np\) = $ns per rank, total_size = num_samples x N = $total, padding = $pad, dropped = $dropped"
    "num_samples per rank +$ns \| $fn\(n/N\) = $ns\$"
    "total_size +$total \| num_samples x N = $total\$"
    "duplicates +$pad \| padding.* = $pad\$"
    "missing +$dropped \| dropped.* = $dropped\$"
    "distinct +$((n - dropped)) \| n - dropped = $((n - dropped))\$"
    "\[rank $((np - 1))\] positions $((np - 1)) \+ ${np}k, k < $ns: "
    "CHECK PASSED: 2 epoch\(s\) .* by $np ranks: .*; 0 problems, 0 wrong lesson-05 samples"
  )
}

# Without shuffle the all-gathered list is 0..n-1 then the wrap-around copies
# 0, 1, ... after the bar (with --drop-last: 0..total_size-1, no bar).
l04_order() {
  local n=$1 np=$2 drop=$3 ns total p out=""
  if [ "$drop" = 1 ]; then ns=$((n / np)); else ns=$(((n + np - 1) / np)); fi
  total=$((ns * np))
  for ((p = 0; p < total; p++)); do
    if [ $p -eq 0 ]; then out="$p"; elif [ $p -eq $n ] && [ "$drop" != 1 ]; then out="$out | $((p % n))"; else out="$out $((p % n))"; fi
  done
  [ $total -eq 0 ] && out="\(none\)"
  echo "all-gathered $total indices, in position order: $out\$"
}

for np in 1 2 3 4; do
  for n in 10 3 7; do
    for drop in 0 1; do
      flag=""; [ $drop = 1 ] && flag=--drop-last
      l04_rows $n $np $drop
      check "04 np=$np n=$n${flag:+ $flag}" $np 0 "${L04_ROWS[@]}" \
        -- $S04 --dataset-size $n --epochs 2 $flag
      check "04 np=$np n=$n --no-shuffle${flag:+ $flag}" $np 0 "${L04_ROWS[@]}" \
        "$(l04_order $n $np $drop)" 'positions changed +0 \| none without shuffle = 0$' \
        -- $S04 --dataset-size $n --epochs 2 --no-shuffle $flag
    done
  done
done

# With 10 samples a repeated order would be a bug (1 chance in 10!): every
# epoch must move some position; the padding copies the first positions.
check "04 np=4 n=10 epochs differ" 4 0 'CHECK PASSED' 'positions changed +[1-9][0-9]*(\.\.[0-9]+)? \|' \
  '2 duplicates, every one at a padded position p >= n holding position p - n' \
  -- $S04 --dataset-size 10 --epochs 3
# Fewer samples than ranks: 3 on 4 ranks pads one; with --drop-last nobody gets any.
check "04 np=4 n=3 drop-last: empty shards" 4 0 'CHECK PASSED' 'positions 3 \+ 4k, k < 0: \(none\)' \
  'missing +3 \| dropped = n - total_size = 3$' -- $S04 --dataset-size 3 --drop-last --epochs 1
# A larger set: the lists are cut for printing, the checks still see all 1001.
check "04 np=4 n=1001" 4 0 'CHECK PASSED' 'k < 251: ' 'duplicates +3 \| padding = total_size - n = 3$' \
  '\(235 more\)' -- $S04 --dataset-size 1001 --epochs 2
# Lesson 05's batches: global batch 1 is positions B..2B-1 with B = 2N.
check "04 np=3 lesson 05 batches" 3 0 'CHECK PASSED' \
  'lesson 05 \(B = 6, 24 samples, data seed 5\): global batch 1 = positions 6..11 ' \
  '\[rank 2\] takes positions 8, 11: samples ' -- $S04 --seed 5 --epochs 1

# Bad input: a clear message, exit code 2.
check "04 dataset-size 0" 2 2 'error: --dataset-size: 0 is out of range' -- $S04 --dataset-size 0
check "04 epochs 0" 2 2 'error: --epochs: 0 is out of range' -- $S04 --epochs 0
check "04 seed not a number" 1 2 "error: --seed: 'abc' is not a whole number" -- $S04 --seed abc
check "04 unknown flag" 2 2 "unknown flag '--bogus'" -- $S04 --bogus
check "04 help" 1 0 'usage: mpirun -np N' '--drop-last' -- $S04 --help
