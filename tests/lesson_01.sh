# Lesson 01_send_recv, sourced by tests/run_tests.sh (needs tests/lib.sh).
#
# Small messages keep every run short. With --max-bytes 64K --iters 10 the
# ping-pong runs 14 sizes (8 B .. 64 KiB), each 2 warm-up + 10 timed round
# trips, so ranks 0 and 1 each send 12 * (8 + 16 + ... + 65536) = 1572768 B;
# rank 0 also sends (N-1) * 64 KiB in part 1, and every rank one int32 token
# (4 B) in part 3 and 64 KiB through sendrecv in part 4.
L01=./01_send_recv/send_recv
L01_SMALL=(--max-bytes 64K --iters 10 --msg-bytes 64K)

for np in 2 3 4; do
  check "lesson 01 np=$np" "$np" 0 'CHECK PASSED: 0 wrong elements' \
    ' 65536 +10 +[0-9.]+ +[0-9.]+ +0$' \
    "got $((np * (np - 1) / 2)) back from rank $((np - 1)) \(formula N\(N-1\)/2 = $((np * (np - 1) / 2))\)" \
    "\[rank 0\] send $(((np - 1) * 65536 + 1572768 + 4)) B in $((np + 168)) calls, formula $(((np - 1) * 65536 + 1572768 + 4)) = $(((np - 1) * 65536)) \+ 1572768 \+ 4 \|" \
    "\[rank 1\] send 1572772 B in 169 calls, formula 1572772 = 0 \+ 1572768 \+ 4 \|" \
    "\[rank $((np - 1))\] .*sendrecv 65536 B, formula 65536" \
    "\[rank $((np - 1))\] received 65536 B from rank 0 .*: 0 wrong elements" \
    -- "$L01" "${L01_SMALL[@]}"
done
# Rank 2 sent only its token: 4 B, in one call.
check "lesson 01 np=3 bystander counters" 3 0 '\[rank 2\] send 4 B in 1 calls, formula 4 = 0 \+ 0 \+ 4 \| sendrecv 65536 B, formula 65536' \
  'got 1 from rank 1 \(formula r\(r-1\)/2 = 1\), sent 3 to rank 0' -- "$L01" "${L01_SMALL[@]}"

# Above 2 MiB the iterations are cut so a size moves at most 256 MiB one way:
# 4 MiB gets 64 timed + 7 warm-up, 1 and 2 MiB get 100 + 11, so rank 1 sends
# 111 * 1M + 111 * 2M + 71 * 4M + 4 = 646971396 B.
check "lesson 01 np=2 large sizes cut the iterations" 2 0 'CHECK PASSED' \
  '^ +4194304 +64 ' '^ +2097152 +100 ' '\[rank 1\] send 646971396 B in 294 calls' \
  -- "$L01" --min-bytes 1M --max-bytes 4M --msg-bytes 64K
# Sizes double from --min-bytes, which need not be a power of two.
check "lesson 01 np=2 sizes 12..96" 2 0 'CHECK PASSED' '^ +12 +10 ' '^ +96 +10 ' '4 sizes' \
  '\[rank 1\] send 2164 B' -- "$L01" --min-bytes 12 --max-bytes 100 --iters 10 --msg-bytes 4K

# Bad input: one clear message, exit code 2, no hang.
check "lesson 01 np=1 too few ranks" 1 2 'at least 2 ranks' -- "$L01"
check "lesson 01 unknown flag" 2 2 "unknown flag '--bogus'" -- "$L01" --bogus
check "lesson 01 --min-bytes 0" 2 2 '--min-bytes: 0 is out of range' -- "$L01" --min-bytes 0
check "lesson 01 max below min" 2 2 '--max-bytes 64 is smaller than --min-bytes 128' \
  -- "$L01" --min-bytes 128 --max-bytes 64
check "lesson 01 size not a multiple of 4" 2 2 '--min-bytes 6 is not a multiple of 4' -- "$L01" --min-bytes 6
check "lesson 01 bad byte count" 2 2 "--max-bytes: '1X' is not a byte count" -- "$L01" --max-bytes 1X
check "lesson 01 --iters 0" 2 2 '--iters: 0 is out of range' -- "$L01" --iters 0
check "lesson 01 --help" 2 0 '--min-bytes BYTES' '--msg-bytes BYTES' -- "$L01" --help

# --deadlock runs the classic mistake for real: the watchdog must name the
# stuck send, its peer and the lesson's line, and end the job with exit 3,
# well before the test's own timeout.
check "01 --deadlock caught by the watchdog np=2" 2 3 \
  'watchdog: rank [01] stuck for 2 s in send #1 on the world communicator \(1048576 elements, peer rank [01]\), called from 01_send_recv/deadlock.c:[0-9]+' \
  -- ./01_send_recv/send_recv --deadlock --timeout 2
check "01 --deadlock caught by the watchdog np=3" 3 3 'watchdog: rank [0-2] stuck for 2 s in send #1' \
  -- ./01_send_recv/send_recv --deadlock --timeout 2
check "01 --deadlock with a message under the eager limit does not hang" 2 1 'no deadlock: 1024 B' \
  -- ./01_send_recv/send_recv --deadlock --msg-bytes 1K --timeout 5
check "01 --timeout 0 refused" 2 2 'error: --timeout: 0 is out of range' -- ./01_send_recv/send_recv --timeout 0
