#!/usr/bin/env bash
# tests/portability.sh FILE...: report each line of the shell scripts FILE
# that needs bash 4 or a GNU-only tool flag, as "FILE:LINE: what (why)",
# and exit 1 if there is one. macOS ships bash 3.2 and BSD tools, and the
# scripts that make tour, make test and make check-N run must work there
# (tests/lib.sh holds the portable helpers to use instead).
#
# Comments are not looked at. A line that must keep a construct (the helper
# that calls GNU timeout where command -v found it) ends with the comment
# "# portability-ok: <why>". The rules are regular expressions, so they are
# a net, not a parser: tests/suite_portability.sh plants each construct in a
# copy and requires that this script report every one.
set -u
[ $# -gt 0 ] || { echo "usage: tests/portability.sh FILE..." >&2; exit 2; }

# one rule a line: ERE <TAB> what it is and what to use instead
rules() {
  cat <<'EOF'
(^|[^[:alnum:]_-])(mapfile|readarray)([^[:alnum:]_-]|$)	mapfile/readarray (bash 4): a while-read loop
(^|[^[:alnum:]_-])(declare|local|typeset)( +-[[:alpha:]]+)* +-[[:alpha:]]*[Alung]	declare -A/-l/-u/-n/-g (bash 4): plain variables, lower, tr
\$\{[#!]?[[:alpha:]_][[:alnum:]_]*(\[[^]]*\])?(,|\^)	${var,,} / ${var^^} (bash 4): lower, tr
&>>	&>> (bash 4): >>FILE 2>&1
\|&	|& (bash 4): 2>&1 |
(^|[^[:alnum:]_-])coproc([^[:alnum:]_-]|$)	coproc (bash 4)
(^|[^[:alnum:]_-])wait +-n	wait -n (bash 4.3)
\[\[ +-v 	[[ -v ]] (bash 4.2): [ -n "${var+set}" ]
\$\{[[:alpha:]_][[:alnum:]_]*(\[[^]]*\])?@[QEPAaUuLK]\}	${var@X} (bash 4.4)
\$\{[[:alpha:]_][[:alnum:]_]*\[-[0-9]+\]\}	negative array index (bash 4.3)
EPOCHREALTIME|EPOCHSECONDS|BASHPID	EPOCHREALTIME/BASHPID (bash 4-5): now, $$
\{[0-9]+\.\.[0-9]+\.\.[0-9]+\}	{a..b..step} (bash 4): seq
(^|[^[:alnum:]_-])exec +\{[[:alpha:]_]+\}[<>]	exec {fd}> (bash 4.1): a fixed fd
shopt +-s +(globstar|lastpipe|autocd|dirspell|checkjobs)	shopt bash 4 option
;;&|;&[[:space:]]*$	case fall-through ;& ;;& (bash 4)
printf +(-v +[[:alnum:]_]+ +)?['"][^'"]*%\(	printf %(...)T (bash 4.2): date
(^|[^[:alnum:]_-])nproc([^[:alnum:]_-]|$)	nproc (GNU): cores (getconf _NPROCESSORS_ONLN)
(^|[^[:alnum:]_-])stat +(-[[:alpha:]]*c|--)	stat -c (GNU): file_size
(^|[^[:alnum:]_-])readlink +-[[:alpha:]]*[fem]	readlink -f (GNU): real_path
(^|[^[:alnum:]_-])sed +(-[[:alpha:]]+ +)*(-[[:alpha:]]*i([[:space:]]|$)|--in-place)	sed -i without a suffix (GNU): sed_inplace
(^|[^[:alnum:]_-])sed +(-[[:alpha:]]+ +)*-[[:alpha:]]*r	sed -r (GNU): sed -E
(^|[^[:alnum:]_-])date .*%N	date +%N (GNU): now
(^|[^[:alnum:]_-])date +(-[[:alpha:]]*d|--date)	date -d (GNU)
(^|[^[:alnum:]_-])grep +(-[[:alpha:]]+ +)*-[[:alpha:]]*P	grep -P (GNU): grep -E
(^|[^[:alnum:]_$-])timeout +(-[[:alpha:]]|[0-9"$])	timeout (GNU coreutils, not on macOS): with_timeout
(^|[^[:alnum:]_-])xargs +(-[[:alpha:]]+ +)*-[[:alpha:]]*[rd]	xargs -r/-d (GNU)
(^|[^[:alnum:]_-])pgrep +(-[[:alpha:]]+ +)*-[[:alpha:]]*c	pgrep -c (not BSD): pgrep | wc -l
(^|[^[:alnum:]_-])sort +(-[[:alpha:]]+ +)*-[[:alpha:]]*V	sort -V (GNU)
(^|[^[:alnum:]_-])find .* -printf	find -printf (GNU)
(^|[^[:alnum:]_-])(head|tail) +-n +-[0-9]	head -n -N (GNU)
(^|[^[:alnum:]_-])(tac|numfmt|truncate|setsid|flock|sha256sum|md5sum)([^[:alnum:]_-]|$)	GNU/Linux-only tool
(^|[^[:alnum:]_-])(du +-[[:alpha:]]*b|base64 +-w|ln +-[[:alpha:]]*r|cp +-[[:alpha:]]*T|mv +-[[:alpha:]]*T|mktemp +-[[:alpha:]]*p)	GNU-only flag
(^|[^[:alnum:]_-])(sed|grep) +[^|;]*['"][^'"]*\\[|+?]	\| \+ \? in a basic regex (GNU): -E
EOF
}

found=0
for f in "$@"; do
  [ -f "$f" ] || { echo "portability: no file $f" >&2; exit 2; }
  # comments out (a # at the start or after a blank; ${#x} and $# stay),
  # and lines that say why they keep a construct
  stripped=$(awk '
    /# portability-ok:/ { print ""; next }
    { sub(/(^|[[:space:]])#.*$/, ""); print }' "$f")
  while IFS="$(printf '\t')" read -r re what; do
    hits=$(printf '%s\n' "$stripped" | grep -nE -- "$re")
    [ -n "$hits" ] || continue
    while IFS= read -r hit; do
      echo "$f:${hit%%:*}: $what"
      found=$((found + 1))
    done <<<"$hits"
  done < <(rules)
done
if [ $found -gt 0 ]; then echo "portability: $found construct(s) that bash 3.2 or BSD tools lack"; exit 1; fi
echo "portability: $# scripts, nothing bash 3.2 or BSD tools lack"
