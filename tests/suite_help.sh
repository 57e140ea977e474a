# Help that tells the truth (sourced by run_tests.sh). For every lesson
# folder, read from its own --help:
#  - every flag it lists is accepted: each number, file and default choice at
#    once (the values its help gives as defaults, short runs; a lesson whose
#    defaults train for a minute names its short run in tour.flags), every other
#    choice, every switch and the checkpoint flags each in a run of their own,
#    at NP 2; a flag whose help starts "with --X" gets --X beside it;
#  - a TEXT flag gets its default, or the example its help gives "(e.g. X)",
#    or else names a file the run writes; a flag whose help gives an example
#    of its use, "(e.g. with --X V ...)", runs with those flags;
#  - a switch whose help says "not under mpirun" runs as one process without
#    mpirun, with the flags that say "with" it (and the short form its
#    folder's alone.flags gives it); accepted there means not refused (no
#    "error:" line, not exit 2): its work has a test of its own;
#  - every shared training flag (DT_TRAIN_OPTIONS in common/train/train.h)
#    and every shared choice it leaves out is refused, exit 2, by
#    "error: --flag: LESSON does not take it: <why>" (DT_REFUSED in its table);
#  - an "fp16:" flag is listed only beside the choice fp16.
# Nothing here names a lesson's flags: a lesson that takes a flag later
# deletes it from its DT_REFUSED line and is then tested as taking it.
HT=build/test-help
HELP_NP=2
# short runs: applied when the lesson lists the flag with a default other
# than 0 (0 there means "not given", and the value would change the run's
# meaning, not its length)
HELP_QUICK="--steps 2 --max-bytes 64K --msg-bytes 64K --params 1024 --iters 2"
rm -rf "$HT"; mkdir -p "$HT"

help_flags() { # "flag meta default" per line of the --help in file $1: meta N, X,
  # BYTES, TEXT, the choices (a|b, or one), or FLAG for a switch
  awk '/^  --/ {
    left = substr($0, 3); sub(/  .*/, "", left) # the columns are two spaces apart at least
    n = split(left, w, " "); d = ""
    if (match($0, /\(default [^)]*\)$/)) d = substr($0, RSTART + 9, RLENGTH - 10)
    print w[1], (n > 1 ? w[2] : "FLAG"), d }' "$1"
}

# the shared training flags: "flag kind choices" from DT_TRAIN_OPTIONS
help_shared() {
  awk '/^#define DT_TRAIN_OPTIONS/ { on = 1 } on { print; if ($0 !~ /\\$/) exit }' common/train/train.h |
    perl -ne 'while (/DT_(INT|DOUBLE|STRING|FLAG)\("(--[\w-]+)",\s*[^,]+,\s*("([^"]*)")?/g) {
      print "$2 $1 ", ($1 eq "STRING" && defined $4 ? $4 : ""), "\n" }'
}

# help_run NAME RC PATTERN BIN ARGS...: one short run (the quick flags the
# lesson lists appended, unless ARGS give them)
help_run() {
  local name=$1 rc=$2 pat=$3 bin=$4; shift 4
  local q quick=() f
  for q in $HELP_QUICK; do
    case $q in --*) f=$q ;; *) [[ " $* " == *" $f "* ]] || ! grep -q "^$f [A-Z]* [1-9]" "$HT/flags" || quick+=("$f" "$q") ;; esac
  done
  TEST_TIMEOUT=${HELP_TIMEOUT:-90} check "$name" "$HELP_NP" "$rc" "$pat" -- "$bin" "$@" ${quick[@]+"${quick[@]}"} </dev/null # mpirun would read the loop's input
}

# help_alone BIN LESSON FLAG: a switch that runs without mpirun, as one
# process, with every flag whose help says "with FLAG:"; accepted means not
# refused: no "error:" line, not exit 2 (nor a timeout). What it does is
# tested by the lesson's own checks.
help_alone() {
  local bin=$1 lesson=$2 flag=$3 w=() f2 rc name="help $2: $3 accepted (alone, not under mpirun)"
  for f2 in $(awk -v f="$flag" '$0 ~ "^  --[a-z0-9-]+ +with " f ":" { print $1 }' "$HT/help"); do
    w+=("$f2")
  done
  # alone.flags: "FLAG WORDS...", a short form of a switch whose whole run the
  # lesson's own tests make (13's --verify: minutes there, seconds here)
  # shellcheck disable=SC2207 # the file's words are flags
  w+=($(awk -v f="$flag" '$1 == f { $1 = ""; print }' "$(dirname "$bin")/alone.flags" 2>/dev/null))
  local log; log=$(check_log "$name")
  with_timeout -k 5 "${HELP_TIMEOUT_ALONE:-600}" "$bin" "$flag" ${w[@]+"${w[@]}"} >"$log" 2>&1 </dev/null
  rc=$?
  if [ $rc = 2 ] || [ $rc -ge 124 ] || grep -q '^error: ' "$log"; then
    fail "$name" "$log" "exit code $rc or an error line: $bin $flag ${w[*]:-}"
  else
    pass "$name"
  fi
}

help_lesson() {
  local bin=$1 lesson; lesson=$(basename "$(dirname "$bin")")
  local t=$HT/$lesson flag meta dflt all=() c short
  short=" $(cat "$(dirname "$bin")/tour.flags" 2>/dev/null) " # "--steps 30": in place of the default
  mkdir -p "$t"
  "$bin" --help >"$HT/help" 2>/dev/null </dev/null # read once: every question below is asked of it
  help_flags "$HT/help" >"$HT/flags"
  if ! [ -s "$HT/flags" ]; then fail "help $lesson: --help lists flags" "" "no '  --flag' line"; return; fi
  while read -r flag meta dflt; do
    case $meta in
      N|X|BYTES)
        [[ $short == *" $flag "* ]] && dflt=${short#* $flag } && dflt=${dflt%% *}
        all+=("$flag" "$dflt") ;;
      TEXT)
        local eg
        eg=$(grep -m1 -- "^  $flag " "$HT/help" | sed -n 's/.*(e\.g\. \([^)]*\)).*/\1/p')
        case $flag in
          --load|--ckpt) ;; # a file of an earlier run, a folder: below
          --compress) ;; # not a file: below
          *) if [ -n "$dflt" ]; then all+=("$flag" "$dflt")
             elif [ -n "$eg" ]; then all+=("$flag" "$eg")
             else all+=("$flag" "$t/${flag#--}.out"); fi ;;
        esac ;;
      FLAG) ;;
      *) [ -n "$dflt" ] && all+=("$flag" "$dflt") ;; # a choice
    esac
  done <"$HT/flags"
  [ -n "${HELP_ONLY:-}" ] ||
    help_run "help $lesson: every number, file and default choice its --help lists, at once" 0 '' \
      "$bin" ${all[@]+"${all[@]}"}
  while read -r flag meta dflt; do
    [ -z "${HELP_ONLY:-}" ] || [ "$flag" = "$HELP_ONLY" ] || continue
    local with=() want=0 pat='' line
    line=$(grep -m1 -- "^  $flag " "$HT/help")
    case $line in *"  with --"*) with=("$(echo "$line" | sed 's/.*  with \(--[a-z0-9-]*\).*/\1/')") ;; esac
    case $line in *"(e.g. with --"*) read -r -a with <<<"$(echo "$line" | sed 's/.*(e\.g\. with \([^)]*\)).*/\1/')" ;; esac
    local kind=$meta
    [[ $meta == *"|"* ]] && kind=choices # (bpe:N among them is a choice, not a number)
    case $flag:$kind in
      --help:*|*:N|*:X|*:BYTES|--ckpt:*|--save-every:*) ;; # in the run above, or below
      --compress:TEXT) help_run "help $lesson: $flag topk:0.5 accepted" 0 '' "$bin" "$flag" topk:0.5 ;;
      --load:TEXT)
        help_run "help $lesson: --load of its own --save accepted" 0 '' "$bin" --load "$t/save.out" ;;
      *:TEXT) ;; # a file: in the run above
      --deadlock:FLAG) # on purpose: the watchdog ends it (a message too large to go eagerly)
        help_run "help $lesson: $flag accepted (the watchdog ends it)" nonzero '^watchdog: rank ' \
          "$bin" "$flag" --timeout 2 --msg-bytes 4M ;;
      --resume:FLAG)
        help_run "help $lesson: --ckpt DIR --save-every 1 accepted" 0 '^checkpoint: step ' \
          "$bin" --ckpt "$t/ck" --save-every 1
        help_run "help $lesson: --resume accepted" 0 '^resume: step ' "$bin" --ckpt "$t/ck" --resume --steps 3 ;;
      *:FLAG)
        local wline=""
        [ -z "${with[*]:-}" ] || wline=$(grep -m1 -- "^  ${with[0]} " "$HT/help")
        case $line$wline in
          *"not under mpirun"*) [ -n "$wline" ] || help_alone "$bin" "$lesson" "$flag" ;; # with it: there
          *) help_run "help $lesson: $flag accepted" 0 '' "$bin" "$flag" ${with[@]+"${with[@]}"} ;;
        esac ;;
      *) # a choice
        for c in $(echo "$meta" | tr '|' ' '); do
          [[ $c == *:N ]] && c=${c%N}8 # a choice that takes a number (bpe:N): one
          if [ "$flag $c" = "--comm nccl" ] && [ "${GPUS:-0}" -lt "$HELP_NP" ]; then
            echo "SKIP help $lesson: --comm nccl needs a GPU per rank (${GPUS:-0} here)"
          elif [ "$c" != "$dflt" ]; then # the default: in the run above
            help_run "help $lesson: $flag $c accepted" 0 '' "$bin" "$flag" "$c" ${with[@]+"${with[@]}"}
          fi
        done ;;
    esac
  done <"$HT/flags"
  if grep -q '^--ckpt ' "$HT/flags" && ! grep -q '^--resume ' "$HT/flags"; then
    help_run "help $lesson: --ckpt DIR accepted" 0 '' "$bin" --ckpt "$t/ck"
  fi
  # what the lesson leaves out of the shared flags is refused, by name
  [ -z "${HELP_ONLY:-}" ] && grep -q '^--steps ' "$HT/flags" || return 0
  local kind choices listed
  while read -r flag kind choices; do
    listed=$(awk -v f="$flag" '$1 == f { print $2 }' "$HT/flags")
    if [ -z "$listed" ]; then
      local v=()
      case $kind in INT|DOUBLE) v=(1) ;; STRING) v=("${choices%%|*}") ; [ -z "$choices" ] && v=("$t/refused") ;; esac
      TEST_TIMEOUT=60 check "help $lesson: $flag, left out of its --help, refused by name" 0 2 \
        "^error: $flag: $lesson does not take it: ." -- "$bin" "$flag" ${v[@]+"${v[@]}"} </dev/null
    elif [ -n "$choices" ]; then
      for c in $(echo "$choices" | tr '|' ' '); do
        [[ "|$listed|" == *"|$c|"* ]] && continue
        TEST_TIMEOUT=60 check "help $lesson: $flag $c, left out of its --help, refused by name" 0 2 \
          "^error: $flag $c: $lesson does not take it: ." -- "$bin" "$flag" "$c" </dev/null
      done
    fi
  done < <(help_shared)
  local fp16_flags
  fp16_flags=$(awk '/^  --/ && / fp16: / { print $1 }' "$HT/help" | tr '\n' ' ')
  if [ -n "$fp16_flags" ] && ! awk '$1 == "--precision" && $2 ~ /(^|\|)fp16(\||$)/' "$HT/flags" | grep -q .; then
    fail "help $lesson: fp16's flags only beside --precision fp16" "" "lists $fp16_flags without the choice fp16"
  fi
}

check "help: the shared training flags read from common/train/train.h" 0 0 '^--load STRING $' \
  '^--precision STRING fp32\|bf16\|fp16$' '^--resume FLAG $' -- bash -c "$(declare -f help_shared); help_shared"
for dir in [0-9][0-9]_*/; do # every lesson, a new NN_name/ folder too
  lesson=${dir%/}
  bin=./$lesson/${lesson#*_}
  [ -x "$bin" ] && help_lesson "$bin"
done

# the check fails where a help lies: 12_mesh's help with a choice it refuses,
# interleaved, planted into --schedule in place of gpipe (HELP_ONLY: that
# flag's runs alone, 1f1b the default's), in a subshell, whose PASS and FAIL
# count there, not here
mkdir -p "$HT/planted/12_mesh"
printf '#!/bin/sh\n[ "$1" = --help ] && { %s --help | sed "s/^  --schedule gpipe|1f1b|zb1 /  --schedule interleaved|1f1b /"; exit 0; }\nexec %s "$@"\n' \
  "$PWD/12_mesh/mesh" "$PWD/12_mesh/mesh" >"$HT/planted/12_mesh/mesh"
chmod +x "$HT/planted/12_mesh/mesh"
if [ -x 12_mesh/mesh ]; then
  (HELP_ONLY=--schedule help_lesson "$HT/planted/12_mesh/mesh") >"$LOGS/help-planted.log" 2>&1
  if grep -q '^FAIL help 12_mesh: --schedule interleaved accepted' "$LOGS/help-planted.log" &&
     [ "$(grep -c '^PASS' "$LOGS/help-planted.log")" = 0 ]; then
    pass "help: a --help listing a choice the lesson refuses (12_mesh's with --schedule interleaved planted) fails the check"
  else
    fail "help: a --help listing a choice the lesson refuses fails the check" "$LOGS/help-planted.log"
  fi
fi
