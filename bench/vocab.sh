#!/usr/bin/env bash
# Lesson 14's vocabulary parallelism measured (`make bench-vocab`; not in
# `make bench` or `make test`). With characters V is ~100 and the logits
# [R, V] are small; with --tokens bpe:N, V = 256 + N. 14_gpt trains its
# default model (L 2, D 64, B 16 windows of S 64: R = 1024 rows a step) at
# V = 4,096 and 16,384 (bpe:3840, bpe:16128) at tp 1, 2 and 4, and once on
# the same text's characters, and this reads per run what the lesson prints:
# the logits' bytes per rank beside their formula R x V/tp x 4, the
# activations' peak, the loss's two all-reduces (bytes, blocked time), the
# median step, the validation loss in nats and in bits per byte (loss x
# tokens / bytes / ln 2 over the validation split, so vocabularies compare).
# Beside them, what gathering [R, V] would cost: each rank would receive
# (tp-1)/tp x R x V x 4 bytes a step, timed by the library's all-gather of
# exactly that size at the same NP (tests/bench_all_gather.c). Then the
# README's question at GPT-2's V = 50,257 (bpe:50001): D 768, one sequence
# of 1,024 tokens, tp 8, one layer, 2 steps.
# Runs skip the check against one process (tests/lesson_14.sh checks).
# The text: BENCH_VOCAB_TEXT, else data/shakespeare.txt (`make data`), else
# (offline) the repository's own .md, .c and .h files at HEAD, concatenated
# into build/vocab/repo.txt (its bytes and SHA-256 recorded).
# Environment: BIN_DIR, MPIRUN, CORES, AG_BIN (build/cpu/bench_all_gather),
# BENCH_VOCAB_STEPS (40), BENCH_VOCAB_MERGES ("3840 16128"), BENCH_VOCAB_TPS
# ("1 2 4"), BENCH_VOCAB_GPT2 (1: run the V = 50,257 question; 0: skip),
# BENCH_VOCAB_TIMEOUT (seconds a run, 900), GNUPLOT.
# Writes bench/vocab.md, bench/vocab.csv and, with gnuplot, bench/vocab.png;
# logs in bench/out/vocab/logs.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-.}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
AG_BIN=${AG_BIN:-build/cpu/bench_all_gather}
STEPS=${BENCH_VOCAB_STEPS:-40}
read -ra MERGES <<<"${BENCH_VOCAB_MERGES:-3840 16128}"
read -ra TPS <<<"${BENCH_VOCAB_TPS:-1 2 4}"
GPT2=${BENCH_VOCAB_GPT2:-1}
TIMEOUT=${BENCH_VOCAB_TIMEOUT:-900}
OUT=bench/out/vocab
BIN=$BIN_DIR/14_gpt/gpt
rm -rf "$OUT" && mkdir -p "$OUT/logs"
die() { echo "bench-vocab: FAILED: $*" >&2; exit 1; }
say() { echo "bench-vocab: $*"; }
[ -x "$BIN" ] || die "$BIN is missing: run 'make all' first"
[ -x "$AG_BIN" ] || die "$AG_BIN is missing: run 'make $AG_BIN' (make bench-vocab builds it)"

TEXT=${BENCH_VOCAB_TEXT:-data/shakespeare.txt}
TEXT_HOW="$TEXT"
if [ ! -f "$TEXT" ]; then
  [ -z "${BENCH_VOCAB_TEXT:-}" ] || die "BENCH_VOCAB_TEXT=$TEXT: no such file"
  TEXT=build/vocab/repo.txt
  mkdir -p build/vocab
  git ls-files '*.md' '*.c' '*.h' | while read -r f; do git show "HEAD:$f" 2>/dev/null || true; done >"$TEXT"
  TEXT_HOW="$TEXT: no data/shakespeare.txt (make data needs the network), so the repository's own .md, .c and .h files at HEAD ($(git rev-parse --short HEAD)), concatenated in git ls-files' order"
fi
BYTES=$(wc -c <"$TEXT" | tr -d ' ')
SHA=$(sha256sum "$TEXT" | cut -d' ' -f1)
say "text $TEXT_HOW: $BYTES bytes, SHA-256 $SHA"

run() { # run NAME NP ARGS...: one program under a timeout, its output in logs/NAME.log
  local name=$1 np=$2 flags=() rc=0
  shift 2
  [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
  [ "$np" -gt "$CORES" ] && flags+=(--oversubscribe)
  local cmd=("$MPIRUN" "${flags[@]}" -np "$np" "$@")
  echo "${cmd[*]}" >>"$OUT/commands.txt"
  # ranks waiting (the BPE's broadcast, a blocked call) give their core up
  OMPI_MCA_mpi_yield_when_idle=1 OPENBLAS_NUM_THREADS=1 timeout -k 5 "$TIMEOUT" "${cmd[@]}" \
    >"$OUT/logs/$name.log" 2>&1 || rc=$?
  [ "$rc" = 0 ] || die "$name: exit code $rc (${cmd[*]}); see $OUT/logs/$name.log"
}
# get LOG SED-EXPRESSION: the first line's match (-E, \1), or die
get() {
  local v
  v=$(sed -En "$2" "$OUT/logs/$1.log" | head -n 1)
  [ -n "$v" ] || die "$1: no line matching $2 in $OUT/logs/$1.log"
  echo "$v"
}
MESH1=(--dp 1 --pp 1 --cp 1)
gpt() { # gpt NAME TP ARGS...: 14_gpt's default model, STEPS steps, evaluated at the end
  local name=$1 tp=$2
  shift 2
  run "$name" "$tp" "$BIN" --text "$TEXT" --tp "$tp" "${MESH1[@]}" --steps "$STEPS" \
    --eval-every "$STEPS" --sample 0 --no-check "$@"
}
gather() { # gather NAME NP COUNT: the library's all-gather of COUNT floats a rank; its ms
  run "$1" "$2" "$AG_BIN" --count "$3" --iters 10 --warmup 2
  grep -q '^CHECK PASSED' "$OUT/logs/$1.log" || die "$1: the all-gather's check failed"
  get "$1" 's/^time: ([0-9.]+) ms .*/\1/p'
}

# one row of the table from run NAME at tp TP (the all-gather's ms: AG)
row() {
  local n=$1 tp=$2 ag=$3
  local V R Vs slice full act activ mx sums t_loss ms bpb val
  V=$(get "$n" 's/^model: GPT .* V=([0-9]+) .*/\1/p')
  R=$(get "$n" 's/^    the logits: \[R, V\/tp\] = \[([0-9]+), ([0-9]+)\].*/\1/p')
  Vs=$(get "$n" 's/^    the logits: \[R, V\/tp\] = \[([0-9]+), ([0-9]+)\].*/\2/p')
  act=$(get "$n" 's/^    the logits: .* a microbatch, ([0-9]+) bytes of activ.*/\1/p')
  slice=$(get "$n" "s/^    never gathered: a rank's slice R x V\/tp x 4 = ([0-9]+) bytes, .*/\1/p")
  full=$(get "$n" "s/^    never gathered: .*R x V x 4 = ([0-9]+)\$/\1/p")
  activ=$(get "$n" 's/^    activ +([0-9]+) +([0-9]+) .*/\1/p')
  mx=$(get "$n" 's/^    tp +all_reduce \(max\) +[0-9]+ +[0-9]+ +([0-9]+) .*/\1/p')
  sums=$(get "$n" 's/^    tp +all_reduce \(sum\|target\) +[0-9]+ +[0-9]+ +([0-9]+) .*/\1/p')
  t_loss=0
  [ "$tp" = 1 ] || t_loss=$(get "$n" "s/^  the loss's two all-reduces .* ([0-9.]+) ms in all\$/\1/p")
  ms=$(get "$n" 's/^throughput: .*\(the median step, ([0-9.]+) ms.*/\1/p')
  val=- bpb=- # a run without evaluation: none
  if grep -q '^eval after step' "$OUT/logs/$n.log"; then
    val=$(get "$n" 's/^eval after step [0-9]+: .*validation loss ([0-9.]+) .*/\1/p')
    bpb=$(get "$n" 's/^  validation ([0-9.]+) bits per byte = .*/\1/p')
  fi
  [ "$slice" = $((R * Vs * 4)) ] || die "$n: the slice $slice is not R x V/tp x 4 = $((R * Vs * 4))"
  local gb
  gb=$(((tp - 1) * R * Vs * 4)) # what an all-gather of [R, V] brings each rank
  echo "$V,$tp,$R,$Vs,$slice,$full,$act,$activ,$gb,${ag:-0},$((mx + sums)),$t_loss,$ms,$val,$bpb"
}

CSV=$OUT/vocab.csv
echo "V,tp,R,V_tp,logits_slice_bytes,logits_full_bytes,logits_and_dlogits_bytes,activ_peak_bytes,gather_receive_bytes,all_gather_ms,loss_all_reduce_bytes,loss_all_reduce_ms,step_ms_median,val_loss_nats,val_bits_per_byte" >"$CSV"
declare -A LEARN
for N in "${MERGES[@]}"; do
  for tp in "${TPS[@]}"; do
    say "14_gpt, bpe:$N, tp $tp, $STEPS steps"
    gpt "bpe${N}_tp$tp" "$tp" --tokens "bpe:$N"
    LEARN[$N]=$(get "bpe${N}_tp$tp" 's/^vocabulary: 256 bytes \+ [0-9]+ merges learned .* in ([0-9.]+) s .*/\1/p')
    ag=""
    if [ "$tp" != 1 ]; then
      R=$(get "bpe${N}_tp$tp" 's/^    the logits: \[R, V\/tp\] = \[([0-9]+), ([0-9]+)\].*/\1 \2/p')
      ag=$(gather "gather${N}_tp$tp" "$tp" $((${R% *} * ${R#* })))
      say "  the all-gather of [R, V] at NP $tp: $ag ms"
    fi
    row "bpe${N}_tp$tp" "$tp" "$ag" >>"$CSV"
  done
done
say "14_gpt, characters, tp 1, $STEPS steps"
gpt char_tp1 1
CHAR_V=$(get char_tp1 's/^model: GPT .* V=([0-9]+) .*/\1/p')
CHAR_VAL=$(get char_tp1 's/^eval after step [0-9]+: .*validation loss ([0-9.]+) .*/\1/p')
CHAR_BPB=$(get char_tp1 's/^  validation ([0-9.]+) bits per byte = .*/\1/p')
CHAR_MS=$(get char_tp1 's/^throughput: .*\(the median step, ([0-9.]+) ms.*/\1/p')

Q4=""
if [ "$GPT2" = 1 ]; then # the README's question 4: GPT-2's V, D 768, one 1024-token sequence, tp 8
  say "14_gpt, bpe:50001 (V = 50,257), D 768, S 1024, B 1, tp 8, 2 steps"
  run gpt2_tp8 8 "$BIN" --text "$TEXT" --tokens bpe:50001 --tp 8 "${MESH1[@]}" --layers 1 \
    --dim 768 --heads 16 --seq 1024 --batch 1 --steps 2 --eval-every 0 --sample 0 --no-check
  R=$(get gpt2_tp8 's/^    the logits: \[R, V\/tp\] = \[([0-9]+), ([0-9]+)\].*/\1 \2/p')
  ag=$(gather gather_gpt2_tp8 8 $((${R% *} * ${R#* })))
  Q4=$(row gpt2_tp8 8 "$ag")
fi

GNUPLOT=${GNUPLOT:-gnuplot}
PLOT=""
if command -v "$GNUPLOT" >/dev/null 2>&1; then
  for N in "${MERGES[@]}"; do
    V=$((256 + N))
    awk -F, -v V="$V" 'NR > 1 && $1 == V { print $2, $5, $9, $11, $10, $12 }' "$CSV" >"$OUT/v$V.dat"
  done
  {
    echo 'if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) { set terminal pngcairo size 1000,440 font ",10" } else { set terminal png size 1000,440 }'
    echo "set output 'bench/vocab.png'"
    echo "set multiplot layout 1,2 title '14\\_gpt: the logits [R, V] over tp (R = 1024 rows a step)'"
    echo "set xlabel 'tp'; set xtics ('1' 1, '2' 2, '4' 4); set logscale y; set logscale x 2; set grid; set key bottom left; set termoption noenhanced"
    echo "set ylabel 'bytes a rank, a step'; set title 'memory and traffic'"
    printf 'plot '
    sep=""
    for N in "${MERGES[@]}"; do
      V=$((256 + N)) d="$OUT/v$((256 + N)).dat"
      printf "%s'%s' using 1:2 with linespoints title 'V=%s logits slice R x V/tp x 4', '%s' using 1:(\$3 > 0 ? \$3 : 1/0) with linespoints dashtype 2 title 'V=%s an all-gather would receive', '%s' using 1:(\$4 > 0 ? \$4 : 1/0) with linespoints dashtype 3 title 'V=%s the loss sends'" \
        "$sep" "$d" "$V" "$d" "$V" "$d" "$V"
      sep=", "
    done
    echo
    echo "set ylabel 'ms a step'; set title 'time (measured)'; set xrange [1.5:4.5]"
    printf 'plot '
    sep=""
    for N in "${MERGES[@]}"; do
      V=$((256 + N)) d="$OUT/v$((256 + N)).dat"
      printf "%s'%s' using 1:(\$5 > 0 ? \$5 : 1/0) with linespoints dashtype 2 title 'V=%s all-gather of [R, V]', '%s' using 1:(\$6 > 0 ? \$6 : 1/0) with linespoints title 'V=%s the loss''s two all-reduces'" \
        "$sep" "$d" "$V" "$d" "$V"
      sep=", "
    done
    echo
    echo "unset multiplot"
  } >"$OUT/vocab.gp"
  if "$GNUPLOT" "$OUT/vocab.gp" 2>"$OUT/logs/gnuplot.log"; then PLOT=1; else say "gnuplot failed; see $OUT/logs/gnuplot.log"; fi
else
  say "no gnuplot: no plot (the table alone)"
fi

{
  echo "## Vocabulary parallelism measured (\`make bench-vocab\`, bench/vocab.sh)"
  echo
  echo "Text: $TEXT_HOW; $BYTES bytes, SHA-256 \`$SHA\`. 14_gpt's default model (L 2, D 64, H 256,"
  echo "4 heads, B 16 windows of S 64 tokens: R = B x S = 1024 rows a step, one microbatch), AdamW, $STEPS steps"
  echo "(a tenth warming up), \`--no-check\`, evaluated after the last step on 4 fixed batches of each split;"
  echo "\`OPENBLAS_NUM_THREADS=1\`, waiting ranks yield (\`OMPI_MCA_mpi_yield_when_idle=1\`)."
  echo "Machine: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//'), $CORES cores; $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo "BPE merges learned (rank 0, one core): $(for N in "${MERGES[@]}"; do printf '%s in %s s; ' "$N" "${LEARN[$N]}"; done | sed 's/; $//')."
  echo
  echo "| V | tp | logits a rank: R x V/tp x 4 (bytes) | [R, V]: R x V x 4 | logits + dlogits in activ | activ peak (measured) | an all-gather of [R, V]: (tp-1)/tp x R x V x 4 received | its time, measured (ms) | the loss's all-reduces: bytes sent | their time (ms) | step (median, ms) | validation loss (nats) | bits per byte |"
  echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  awk -F, 'NR > 1 { printf "| %s | %s | %s x %s x 4 = %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, ($2 == 1 ? "-" : sprintf("(%s-1)/%s x %s x %s x 4 = %s", $2, $2, $3, $1, $9)), ($2 == 1 ? "-" : $10), ($2 == 1 ? "-" : $11), ($2 == 1 ? "-" : $12), $13, $14, $15 }' "$CSV"
  echo "| $CHAR_V (characters) | 1 | | | | | - | - | - | - | $CHAR_MS | $CHAR_VAL | $CHAR_BPB |"
  echo
  echo "The validation split's tokens and bytes, as each run printed them (bits per byte = loss x tokens / bytes / ln 2):"
  echo '```'
  for N in "${MERGES[@]}"; do grep -h -m1 '^  validation .* bits per byte' "$OUT/logs/bpe${N}_tp${TPS[0]}.log"; done
  grep -h -m1 '^  validation .* bits per byte' "$OUT/logs/char_tp1.log"
  echo '```'
  echo
  echo "What one run printed (bpe:${MERGES[-1]}, tp ${TPS[-1]}):"
  echo '```'
  grep -h -E '^vocabulary: |^model: |^text |^eval after|^  validation |^  time per step|^    tp +all_reduce \((max|sum)|^  time blocked|^  the loss.s two|^    activ |^    the logits|^    never gathered|^throughput' \
    "$OUT/logs/bpe${MERGES[-1]}_tp${TPS[-1]}.log"
  echo '```'
  echo "and the all-gather of the same [R, V] at NP ${TPS[-1]}:"
  echo '```'
  sed -n '/^all_gather: /,$p' "$OUT/logs/gather${MERGES[-1]}_tp${TPS[-1]}.log"
  echo '```'
  if [ -n "$Q4" ]; then
    IFS=, read -r V tp R Vs slice full act activ gb ag lb lt ms val bpb <<<"$Q4"
    echo
    echo "### GPT-2's vocabulary (14_gpt/README.md, question 4)"
    echo
    echo "bpe:50001 = 50,257 tokens (padded to V = $V at tp 8), D 768, 16 heads (GPT-2's 12 do not split over tp 8), one layer, one sequence of"
    echo "1,024 tokens (B 1: R = $R rows), tp 8 (NP 8 on $CORES cores), 2 steps: a rank's logits $slice bytes"
    echo "(R x V/tp x 4), the whole [R, V] $full; an all-gather of them would bring each rank $gb bytes"
    echo "((tp-1)/tp x R x V x 4), measured at $ag ms at NP 8; the loss's two all-reduces sent $lb bytes a rank"
    echo "($lt ms blocked), a ratio of $(awk -v a="$gb" -v b="$lb" 'BEGIN { printf "%.0f", a / b }') in bytes. The run's lines:"
    echo '```'
    grep -h -E '^vocabulary: |^model: |^text |^    tp +all_reduce \((max|sum)|^  the loss.s two|^    activ |^    the logits|^    never gathered|^  time per step' "$OUT/logs/gpt2_tp8.log"
    sed -n '/^all_gather: /,$p' "$OUT/logs/gather_gpt2_tp8.log"
    echo '```'
  fi
  echo
  [ -z "$PLOT" ] && echo "(no plot: gnuplot is not installed here)" || echo "![the logits over tp](vocab.png)"
  echo
  echo "Commands (in order):"
  echo '```'
  cat "$OUT/commands.txt"
  echo '```'
} >bench/vocab.md
cp "$CSV" bench/vocab.csv
say "wrote bench/vocab.md, bench/vocab.csv$([ -n "$PLOT" ] && echo ", bench/vocab.png")"
