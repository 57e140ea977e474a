# Lesson 02_broadcast: linear, binomial-tree and library broadcast.
# Sourced by tests/run_tests.sh (check() comes from tests/lib.sh). Small sizes
# keep every run short; the byte totals are exact: (N-1)*S for all three ways.
B=./02_broadcast/broadcast
SMALL="--max-bytes 64K --params 4096 --iters 5"

# Every NP passes its own check, and the totals match (N-1)*S with S = 65536.
for np in 1 2 3 4; do
  t=$(( (np - 1) * 65536 ))
  check "02 np=$np" "$np" 0 'CHECK PASSED' '0 wrong elements' 'bytes vs formula: 0 mismatches' \
    "total over $np ranks: linear $t B, tree $t B, library $t B; formula \(N-1\)\*S = $t B" \
    'weights checksums equal on all ranks, 0 elements differ' -- $B $SMALL
done

# A root other than 0: rank 3 is the tree's relative rank 0, with 2 children.
check "02 np=4 root=3 per-rank bytes" 4 0 'CHECK PASSED' \
  '\[rank 3\] rel 0 \| linear 196608 B \(formula 196608\) \| tree 131072 B \(formula 2 children\*S = 131072\)' \
  '\[rank 0\] rel 1 \| linear 0 B \(formula 0\) \| tree 65536 B \(formula 1 children\*S = 65536\)' \
  "root's send calls: linear 3 \(N-1 = 3\), tree 2 \(ceil\(log2 N\) = 2\)" \
  'tree round 2: 3->1 0->2' -- $B $SMALL --root 3

# Non-powers of two: 5 ranks need 3 rounds, 6 ranks too.
check "02 np=5 root=2" 5 0 'CHECK PASSED' 'tree: ceil\(log2 N\) = 3 rounds' \
  'total over 5 ranks: linear 4096 B, tree 4096 B, library 4096 B; formula \(N-1\)\*S = 4096 B' \
  "root's send calls: linear 4 \(N-1 = 4\), tree 3 \(ceil\(log2 N\) = 3\)" \
  -- $B --max-bytes 1K --params 1000 --iters 3 --root 2
check "02 np=6 root=5" 6 0 'CHECK PASSED' \
  '\[rank 5\] rel 0 \| linear 5120 B \(formula 5120\) \| tree 3072 B \(formula 3 children\*S = 3072\)' \
  '\[rank 0\] rel 1 \| linear 0 B \(formula 0\) \| tree 2048 B \(formula 2 children\*S = 2048\)' \
  -- $B --max-bytes 1K --params 1000 --iters 3 --root 5

# Bad input: a clear message and exit code 2, never a hang.
check "02 unknown flag" 2 2 "unknown flag '--bogus'" -- $B --bogus
check "02 root out of range" 4 2 'error: --root 4 is not a rank: with 4 ranks it must be 0..3' \
  -- $B --root 4
check "02 negative root" 2 2 'error: --root: -1 is out of range' -- $B --root -1
check "02 bytes not a multiple of 4" 2 2 'error: --min-bytes 6 is not a multiple of 4' \
  -- $B --min-bytes 6
check "02 min above max" 2 2 'error: --min-bytes 1024 is larger than --max-bytes 16' \
  -- $B --min-bytes 1K --max-bytes 16
check "02 max-bytes too large" 2 2 'error: --max-bytes: 2G is out of range' -- $B --max-bytes 2G
check "02 max-bytes not a size" 2 2 "error: --max-bytes: 'abc' is not a byte count" \
  -- $B --max-bytes abc
check "02 help" 1 0 'usage: mpirun -np N' '--root N' -- $B --help
