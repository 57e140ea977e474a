#!/usr/bin/env bash
# Lesson 14's bench, a section of `make bench` (also alone: `make bench-gpt`):
# nanoGPT's CPU quick-start configuration of shakespeare_char (4 layers, 4
# heads, 128 wide, block 64, batch 12, 2,000 iterations, lr 1e-3, warm-up
# 100, the cosine to lr/10 at 2,000, evaluation every 250 iterations over 20
# batches, dropout 0) trained by 14_gpt at NP 1, 2 (dp 2) and on the
# 16-rank mesh (2,2,2,2), and the same run in PyTorch on the same machine,
# one thread (bench/torch_gpt_train.py: the same model from the same
# initial weights, on the same windows step by step, 14_gpt's NP 1 run
# dumped with --dump-data). It prints ms per iteration (evaluation left
# out), the train and validation curves (a plot with gnuplot), both final
# models' validation loss on the same windows, and a 500-character sample.
# Its runs skip the check against one process (tests/lesson_14.sh checks);
# they only time and train.
# Environment: BIN_DIR, MPIRUN, CORES, BENCH_GPT_TEXT (default
# data/shakespeare.txt, `make data`; README.md when it is not there, said
# so), BENCH_GPT_ITERS (2000), BENCH_GPT_EVAL (250), BENCH_GPT_NPS ("1 2
# 16"), BENCH_GPT_TIMEOUT (seconds per run, 7200), GNUPLOT.
# Writes bench/out/gpt/gpt.md, gpt.csv (the curves) and gpt.png; `make
# bench` copies them to bench/.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${BIN_DIR:-.}
MPIRUN=${MPIRUN:-mpirun}
CORES=${CORES:-$(nproc 2>/dev/null || echo 1)}
ITERS=${BENCH_GPT_ITERS:-2000}
EVAL=${BENCH_GPT_EVAL:-250}
NPS=(${BENCH_GPT_NPS:-1 2 16})
TIMEOUT=${BENCH_GPT_TIMEOUT:-7200}
TEXT=${BENCH_GPT_TEXT:-data/shakespeare.txt}
OUT=${BENCH_OUT:-bench/out}/gpt # BENCH_OUT: make bench-quick puts its own apart
BIN=$BIN_DIR/14_gpt/gpt
rm -rf "$OUT" && mkdir -p "$OUT/logs"
die() { echo "bench-gpt: FAILED: $*" >&2; exit 1; }
say() { echo "bench-gpt: $*"; }
[ -x "$BIN" ] || die "$BIN is missing: run 'make all' first"
if [ ! -f "$TEXT" ]; then
  [ -z "${BENCH_GPT_TEXT:-}" ] || die "BENCH_GPT_TEXT=$TEXT: no such file"
  say "no $TEXT (make data fetches it): training on README.md instead"
  TEXT=README.md
fi
WARMUP=100
[ "$ITERS" -gt $((10 * WARMUP)) ] || WARMUP=$((ITERS / 10)) # a short run: a tenth warms up
# nanoGPT's: python train.py config/train_shakespeare_char.py --device=cpu --compile=False
# --eval_iters=20 --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4
# --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0
MODEL=(--layers 4 --heads 4 --dim 128 --seq 64 --batch 12 --lr 1e-3 --warmup "$WARMUP"
  --lr-decay-steps "$ITERS" --eval-batches 20 --text "$TEXT" --no-check)
mesh_of() { # the mesh at NP $1
  case $1 in
    1) ;;
    2) echo --dp 2 ;;
    16) echo --dp 2 --pp 2 --cp 2 --tp 2 --micro 2 ;;
    *) echo --dp "$1" ;;
  esac
}
run() { # run NAME NP ARGS...: 14_gpt under a timeout, its output in logs/NAME.log
  local name=$1 np=$2 flags=() rc=0
  shift 2
  [ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
  [ "$np" -gt "$CORES" ] && flags+=(--oversubscribe)
  local cmd=("$MPIRUN" "${flags[@]}" -np "$np" "$BIN" "$@")
  echo "${cmd[*]}" >>"$OUT/commands.txt"
  OPENBLAS_NUM_THREADS=1 timeout -k 5 "$TIMEOUT" "${cmd[@]}" >"$OUT/logs/$name.log" 2>&1 || rc=$?
  [ "$rc" = 0 ] || die "$name: exit code $rc (${cmd[*]}); see $OUT/logs/$name.log"
}
ms_of() { awk '/^  time per step/ { print $4; exit }' "$OUT/logs/$1.log"; }
evals_of() { # NAME: "step train val" lines
  sed -En 's/^eval after step ([0-9]+): train loss ([0-9.]+), validation loss ([0-9.]+).*/\1 \2 \3/p' "$1"
}

say "text $TEXT, $ITERS iterations, NP ${NPS[*]} (logs in $OUT/logs)"
run init 1 "${MODEL[@]}" --steps 0 --sample 0 --save "$OUT/init.safetensors"
declare -A MS
for np in "${NPS[@]}"; do
  extra=(--sample 0)
  # NP 1: the sample, the windows for PyTorch, the model to compare
  [ "$np" = 1 ] && extra=(--sample 500 --temperature 0.8 --dump-data "$OUT/data.safetensors"
    --save "$OUT/final.safetensors")
  say "14_gpt at NP $np $(mesh_of "$np")"
  # shellcheck disable=SC2046 # the mesh's flags
  run "np$np" "$np" "${MODEL[@]}" --steps "$ITERS" --eval-every "$EVAL" $(mesh_of "$np") "${extra[@]}"
  MS[$np]=$(ms_of "np$np")
  say "  ${MS[$np]} ms per iteration"
done
TORCH=""
if [[ " ${NPS[*]} " == *" 1 "* ]] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  say "PyTorch, one thread, the same model, weights and windows"
  OMP_NUM_THREADS=1 timeout -k 5 "$TIMEOUT" /usr/bin/python3 bench/torch_gpt_train.py \
    --init "$OUT/init.safetensors" --data "$OUT/data.safetensors" --text "$TEXT" \
    --final "$OUT/final.safetensors" --eval-every "$EVAL" --eval-batches 20 --threads 1 \
    >"$OUT/logs/torch.log" 2>&1 || die "bench/torch_gpt_train.py failed; see $OUT/logs/torch.log"
  TORCH=$(awk '/^time per iteration:/ { print $4 }' "$OUT/logs/torch.log")
  say "  $TORCH ms per iteration"
else
  say "PyTorch not importable (or NP 1 not run): no side by side"
fi

# the curves: step, then train and validation loss of each run
{
  printf 'run,step,train_loss,val_loss\n'
  for np in "${NPS[@]}"; do evals_of "$OUT/logs/np$np.log" | awk -v r="14_gpt np=$np" '{ print r "," $1 "," $2 "," $3 }'; done
  [ -z "$TORCH" ] || evals_of "$OUT/logs/torch.log" | awk '{ print "pytorch," $1 "," $2 "," $3 }'
} >"$OUT/gpt.csv"
GNUPLOT=${GNUPLOT:-gnuplot}
if command -v "$GNUPLOT" >/dev/null 2>&1; then
  for np in "${NPS[@]}"; do evals_of "$OUT/logs/np$np.log" >"$OUT/np$np.dat"; done
  [ -z "$TORCH" ] || evals_of "$OUT/logs/torch.log" >"$OUT/torch.dat"
  {
    echo 'if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) { set terminal pngcairo size 900,560 font ",10" } else { set terminal png size 900,560 }'
    echo "set output '$OUT/gpt.png'"
    echo "set title '14_gpt: nanoGPT CPU configuration on $(basename "$TEXT") (loss on 20 batches of 12 windows)'"
    echo "set xlabel 'iteration'; set ylabel 'loss'; set grid; set key top right; set termoption noenhanced"
    printf 'plot '
    sep=""
    for np in "${NPS[@]}"; do
      printf "%s'%s' using 1:2 with lines title 'train NP %s', '%s' using 1:3 with linespoints title 'validation NP %s'" \
        "$sep" "$OUT/np$np.dat" "$np" "$OUT/np$np.dat" "$np"
      sep=", "
    done
    [ -z "$TORCH" ] || printf "%s'%s' using 1:3 with linespoints dashtype 2 title 'validation PyTorch'" "$sep" "$OUT/torch.dat"
    echo
  } >"$OUT/gpt.gp"
  "$GNUPLOT" "$OUT/gpt.gp" 2>"$OUT/logs/gnuplot.log" || say "gnuplot failed; see $OUT/logs/gnuplot.log"
fi

# the page
last_of() { evals_of "$1" | tail -n 1; }
{
  echo "## A GPT on a text: nanoGPT's CPU configuration (\`make bench-gpt\`, bench/gpt.sh)"
  echo
  echo "Text $TEXT ($(wc -c <"$TEXT" | tr -d ' ') bytes), $ITERS iterations of batch 12 x 64 tokens, L 4, 4 heads, D 128,"
  echo "lr 1e-3 (warm-up $WARMUP, cosine to 1e-4 at $ITERS), AdamW (0.9, 0.99), weight decay 0.1, clip 1;"
  echo "evaluation every $EVAL iterations on 20 fixed batches of 12 windows of each split. $(grep -m1 '^model: ' "$OUT/logs/np1.log" 2>/dev/null | sed 's/ | text.*//')."
  echo "Machine: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//'), $CORES cores; $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo
  echo "The last losses are each run's own evaluation (14_gpt's fixed batches; PyTorch's drawn by its"
  echo "script); the line after the table compares the two final models on the same windows."
  echo
  echo "| run | mesh | ms / iteration | last train loss | last validation loss |"
  echo "|---|---|--:|--:|--:|"
  for np in "${NPS[@]}"; do
    read -r s tr va <<<"$(last_of "$OUT/logs/np$np.log")"
    echo "| 14_gpt NP $np | $(grep -m1 '^the mesh: ' "$OUT/logs/np$np.log" | sed 's/^the mesh: //; s/ (.*//') | ${MS[$np]} | $tr | $va |"
  done
  if [ -n "$TORCH" ]; then
    read -r s tr va <<<"$(last_of "$OUT/logs/torch.log")"
    echo "| PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), 1 thread | one process | $TORCH | $tr | $va |"
  fi
  echo "| nanoGPT's README (its CPU run, shakespeare_char, 2,000 iterations) | one process | | | 1.88 (\"about 3 minutes\") |"
  echo
  if [ -n "$TORCH" ]; then
    echo "14_gpt NP 1 against PyTorch: $(grep -m1 '^the same ' "$OUT/logs/torch.log")."
    echo "14_gpt NP 1's time per iteration / PyTorch's: $(awk -v a="${MS[1]}" -v b="$TORCH" 'BEGIN { printf "%.2f", a / b }')."
    echo
  fi
  echo "The 500 characters 14_gpt NP 1 wrote after training (temperature 0.8):"
  echo '```'
  sed -n '/^sample (500 tokens/,/^reference: \|^saved /p' "$OUT/logs/np1.log" | sed '1d; /^saved /d; /^reference: /d'
  echo '```'
  [ ! -f "$OUT/gpt.png" ] || echo "![the curves](gpt.png)"
} >"$OUT/gpt.md"
say "wrote $OUT/gpt.md, $OUT/gpt.csv$([ -f "$OUT/gpt.png" ] && echo ", $OUT/gpt.png")"
