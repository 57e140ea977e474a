# The documentation (sourced by run_tests.sh): what a newcomer reads first
# must not go stale when a lesson is added. The lessons are the folders
# NN_name/ holding a .c (as the Makefile finds them), never a list here.
#  - README.md: a row for every lesson in the learning path and in the tour
#    summary; no lesson count spelled out ("nine small programs"); at most
#    300 lines (a landing page; the rest lives in docs/);
#  - every relative link and #anchor of the README, docs/, TEACHING.md,
#    CHECKING.md, common/'s and the lessons' READMEs leads to a file and a
#    heading that exist;
#  - docs/adding-a-lesson.md's example number is free;
#  - common/comm/README.md and common/train/README.md name every file of
#    their folder;
#  - the tour's summary shows every lesson's concept whole (tests/tour.sh
#    wraps it): each lesson's concept, from its --help, through tour.sh;
#  - the tour names a refusal (needs 2+, cpu only) without failing, and
#    still fails on a failed check.
DD=build/test-docs
rm -rf "$DD"; mkdir -p "$DD"
docs_lessons=()
for d in [0-9][0-9]_*/; do
  ls "$d"*.c >/dev/null 2>&1 && docs_lessons+=("${d%/}")
done

# the README's learning path: a table row "| N | [NN_name](NN_name/) | ..."
docs_path_missing=""
docs_tour_missing=""
awk '/^## The learning path/ { on = 1; next } /^## / { on = 0 } on' README.md >"$DD/path.md"
awk '/^=+ tour summary/ { on = 1; next } /^```/ { on = 0 } on' README.md >"$DD/tour.txt"
for l in "${docs_lessons[@]}"; do
  grep -q "^| [0-9]* | \[$l\]($l/) |" "$DD/path.md" || docs_path_missing="$docs_path_missing $l"
  grep -q "^$l  *[^ ].* PASSED  *[0-9.]*$" "$DD/tour.txt" || docs_tour_missing="$docs_tour_missing $l"
done
if [ ${#docs_lessons[@]} -gt 0 ] && [ -z "$docs_path_missing" ]; then
  pass "docs: README's learning path has a row for each of the ${#docs_lessons[@]} lesson folders"
else fail "docs: README's learning path has a row for every lesson folder" "" "missing:${docs_path_missing:- no lesson found}"; fi
if [ ${#docs_lessons[@]} -gt 0 ] && [ -z "$docs_tour_missing" ]; then
  pass "docs: README's tour summary has a row for each of the ${#docs_lessons[@]} lesson folders"
else fail "docs: README's tour summary has a row for every lesson folder" "" "missing:${docs_tour_missing:- no lesson found} (run make tour and paste its summary)"; fi

# counted words go stale with the next lesson ("nine small programs", "all ten lessons")
docs_counted='\b(three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen) (small )?(programs|lessons)\b'
check "docs: no lesson count spelled out in words (README, docs/, TEACHING, CHECKING, the maps and lessons)" 0 1 -- \
  grep -niwE "$docs_counted" README.md docs/*.md TEACHING.md CHECKING.md common/*/README.md [0-9][0-9]_*/README.md
docs_lines=$(($(wc -l <README.md)))
if [ "$docs_lines" -le 300 ]; then pass "docs: README.md is a landing page: $docs_lines lines (at most 300)"
else fail "docs: README.md is a landing page (at most 300 lines)" "" "$docs_lines lines: move a section into docs/"; fi

# links: [text](path) and [text](path#anchor), relative to the file; an
# anchor is GitHub's: the heading lowercased, punctuation but - and _ dropped,
# spaces as -
check "docs: every relative link and anchor leads somewhere" 0 0 '^links: [0-9]+ checked, 0 broken$' -- \
  perl -e '
    sub anchors { my $f = shift; my %a; open(my $h, "<", $f) or return {}; my $fence = 0;
      while (<$h>) { $fence = !$fence if /^```/; next if $fence || !/^#+\s+(.*?)\s*$/;
        my $s = lc $1; $s =~ s/[^\w\- ]//g; $s =~ s/ /-/g; $a{$s} = 1 } return \%a }
    my ($n, $bad) = (0, 0);
    for my $f (@ARGV) {
      open(my $h, "<", $f) or next; my $fence = 0; (my $dir = $f) =~ s{[^/]*$}{};
      while (<$h>) { my $ln = $.; $fence = !$fence if /^```/; next if $fence;
        while (/\]\(([^)\s]+)\)/g) { my $t = $1; next if $t =~ /^(https?|mailto):/; $n++;
          my ($p, $a) = split /#/, $t, 2; my $target = $p eq "" ? $f : $dir . $p;
          if (!-e $target) { print "$f:$ln: $t: no such file\n"; $bad++; next }
          if (defined $a && $target =~ /\.md$/ && !anchors($target)->{$a}) { print "$f:$ln: $t: no such heading\n"; $bad++ } } } }
    print "links: $n checked, $bad broken\n"; exit($bad ? 1 : 0)' \
  README.md docs/*.md TEACHING.md CHECKING.md common/*/README.md [0-9][0-9]_*/README.md

# docs/adding-a-lesson.md's example takes a number no lesson has
docs_n=$(sed -n 's/.*make lesson-\([0-9][0-9]\) .*/\1/p' docs/adding-a-lesson.md | head -n 1)
if [ -n "$docs_n" ] && ! ls -d "$docs_n"_*/ >/dev/null 2>&1; then
  pass "docs: docs/adding-a-lesson.md's example lesson $docs_n is a free number"
else fail "docs: docs/adding-a-lesson.md's example lesson is a free number" "" "lesson '$docs_n': $(ls -d "$docs_n"_*/ 2>/dev/null)"; fi

# the maps of common/ name every file of their folder
for docs_map in common/comm common/train; do
  docs_unnamed=""
  for f in "$docs_map"/*; do
    b=$(basename "$f")
    [ "$b" = README.md ] && continue
    grep -qF "$b" "$docs_map/README.md" || docs_unnamed="$docs_unnamed $b"
  done
  if [ -z "$docs_unnamed" ]; then pass "docs: $docs_map/README.md names every file of $docs_map"
  else fail "docs: $docs_map/README.md names every file of $docs_map" "" "not named:$docs_unnamed"; fi
done

# the tour's summary: a stand-in for each lesson prints its banner's first two
# lines (the concept is --help's first line after "NN_name: ") and passes, at
# NP=1 (one rank prints); tour.sh must show each concept whole, wrapped at
# spaces into its column
docs_bins=()
docs_want=""
for l in "${docs_lessons[@]}"; do
  b=./$l/${l#*_}
  [ -x "$b" ] || continue
  concept=$("$b" --help 2>/dev/null | head -n 1 | sed "s/^$l: //")
  mkdir -p "$DD/$l"
  printf '%s\n%s\nCHECK PASSED: stand-in\n' "$l" "$concept" >"$DD/$l/banner"
  printf '#!/bin/sh\ncat "$(dirname "$0")/banner"\n' >"$DD/$l/${l#*_}"
  chmod +x "$DD/$l/${l#*_}"
  docs_bins+=("$DD/$l/${l#*_}")
  docs_want="$docs_want$l $concept
"
done
NP=1 MPIRUN_FLAGS="$([ "$(id -u)" = 0 ] && echo --allow-run-as-root)" \
  with_timeout -k 5 300 bash tests/tour.sh ${docs_bins[@]+"${docs_bins[@]}"} >"$DD/tour.log" 2>&1
awk '/^=+ tour summary/ { on = 1; getline; next }
  on && /^[0-9][0-9]_/ { if (l != "") print l, c; l = $1; c = substr($0, 16, 66); sub(/ +$/, "", c); next }
  on && /^               [^ ]/ { x = substr($0, 16); sub(/ +$/, "", x); c = c " " x }
  END { if (l != "") print l, c }' "$DD/tour.log" >"$DD/tour-concepts.txt"
printf '%s' "$docs_want" >"$DD/want-concepts.txt"
if [ -n "$docs_want" ] && cmp -s "$DD/want-concepts.txt" "$DD/tour-concepts.txt"; then
  pass "docs: the tour's summary shows each of the ${#docs_bins[@]} lessons' concept whole, wrapped at spaces"
else
  fail "docs: the tour's summary shows each lesson's concept whole" "$DD/tour.log" \
    "$(diff "$DD/want-concepts.txt" "$DD/tour-concepts.txt" | head -n 6 | tr '\n' ' ')"
fi

# the tour's verdicts: a lesson that refuses the NP ("needs at least 2
# ranks", as 01 at NP=1) or the backend ("runs on the cpu backend only", as
# 10-12 on cuda) is named so and is no failure; a failed check still fails
# the tour. Stand-ins print what the lessons print (the refusals without a
# banner, or after it) and take --help as the lessons do.
docs_refuse() { # docs_refuse NN_name BODY: a stand-in lesson NN_name running BODY
  mkdir -p "$DD/verdicts/$1"
  printf '#!/bin/sh\n[ "$1" = --help ] && { echo "%s: a stand-in"; exit 0; }\n%s\n' "$1" "$2" \
    >"$DD/verdicts/$1/${1#*_}"
  chmod +x "$DD/verdicts/$1/${1#*_}"
}
docs_refuse 01_few 'echo "error: 01_few needs at least 2 ranks, got 1" >&2; exit 2'
docs_refuse 02_host 'printf "02_host | backend cuda\na stand-in\n"; echo "error: 02_host runs on the cpu backend only for now: host loops" >&2; exit 2'
docs_refuse 03_bad 'printf "03_bad | backend cpu\na stand-in\nCHECK FAILED: planted\n"; exit 1'
docs_tour() { # docs_tour LOG LESSON...: the tour over those stand-ins at NP=1; its exit code
  NP=1 MPIRUN_FLAGS="$([ "$(id -u)" = 0 ] && echo --allow-run-as-root)" \
    with_timeout -k 5 120 bash tests/tour.sh "${@:2}" >"$1" 2>&1
}
docs_tour "$DD/verdicts/ok.log" "$DD/verdicts/01_few/few" "$DD/verdicts/02_host/host"
docs_rc=$?
if [ $docs_rc = 0 ] && grep -Eq '^01_few +a stand-in +needs 2[+] ' "$DD/verdicts/ok.log" &&
  grep -Eq '^02_host +a stand-in +cpu only ' "$DD/verdicts/ok.log"; then
  pass "docs: the tour names a refused NP (needs 2+) and a refused backend (cpu only), and passes"
else
  fail "docs: the tour names a refused NP (needs 2+) and a refused backend (cpu only), and passes" \
    "$DD/verdicts/ok.log" "exit $docs_rc"
fi
docs_tour "$DD/verdicts/bad.log" "$DD/verdicts/01_few/few" "$DD/verdicts/03_bad/bad"
docs_rc=$?
if [ $docs_rc = 1 ] && grep -Eq '^03_bad +a stand-in +FAILED \(exit 1\)' "$DD/verdicts/bad.log"; then
  pass "docs: a failed check still fails the tour beside a refusal (exit 1, FAILED)"
else
  fail "docs: a failed check still fails the tour beside a refusal (exit 1, FAILED)" \
    "$DD/verdicts/bad.log" "exit $docs_rc"
fi
# docs/benchmarks.md's make bench-quick (and make bench QUICK=1) is bench/run.sh in its
# quick mode, and plain make bench is not (make -n: nothing runs, about a second)
bq=$(${MAKE:-make} -n bench-quick 2>&1 | grep 'bash bench/run.sh')
bq1=$(${MAKE:-make} -n bench QUICK=1 2>&1 | grep 'bash bench/run.sh')
bfull=$(${MAKE:-make} -n bench 2>&1 | grep 'bash bench/run.sh')
if [[ $bq == BENCH_QUICK=1\ * ]] && [[ $bq1 == BENCH_QUICK=1\ * ]] && [[ $bfull == BENCH_QUICK=\ * ]]; then
  pass "docs: make bench-quick and make bench QUICK=1 run bench/run.sh with BENCH_QUICK=1, make bench without"
else
  fail "docs: make bench-quick and make bench QUICK=1 run bench/run.sh with BENCH_QUICK=1, make bench without" "" \
    "bench-quick: $bq; QUICK=1: $bq1; bench: $bfull"
fi
