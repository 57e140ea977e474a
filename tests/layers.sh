#!/usr/bin/env bash
# The layering of common (tests/suite_layers.sh runs it): the communication
# layer (common/comm, libdtcomm.a) below the training layer (common/train,
# libdttrain.a), and calls that only go down inside each. Each command prints
# what breaks the rule, one line each, and exits 1 when anything does.
#
#   layers.sh includes COMM_DIR TRAIN_DIR FILE...
#       no file of COMM_DIR, nor any FILE (the lessons 01-04), includes a
#       header of TRAIN_DIR
#   layers.sh below LOWER.a UPPER.a
#       no member of LOWER needs a symbol that UPPER defines
#   layers.sh beneath DIR TOP...
#       no file of DIR includes a header by a path under any TOP (13_plan,
#       the cost model, beneath 14_gpt and its tool, tools/plan)
#   layers.sh circles LIB.a
#       no two members of LIB need each other, directly or through others
#       (A needs B: A has an undefined symbol that B defines)
set -u

# "member symbol" lines of an archive: what each member defines or needs
defined() { nm -A -g --defined-only "$1" 2>/dev/null | awk '{ split($1, p, ":"); print p[2], $NF }'; }
needed() { nm -A -u "$1" 2>/dev/null | awk '{ split($1, p, ":"); print p[2], $NF }'; }

case ${1:-} in
includes)
  comm=$2 train=$3
  shift 3
  headers=$(cd "$train" && ls -- *.h | paste -sd'|')
  [ -n "$headers" ] || { echo "no headers in $train"; exit 2; }
  # every quoted include, with its file and line: FILE:LINE:#include "x.h"
  bad=$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$comm"/*.c "$comm"/*.h "$comm"/*.cu "$@" 2>/dev/null |
    grep -E "\"([^\"]*/)?($headers)\"")
  [ -z "$bad" ] && exit 0
  echo "$bad" | sed 's/^/includes a training header: /'
  exit 1
  ;;
below)
  lower=$2 upper=$3
  bad=$(join -1 2 -2 2 <(needed "$lower" | sort -k2,2) <(defined "$upper" | sort -k2,2) |
    awk '{ print $2 " needs " $1 ", defined by " $3 }')
  [ -z "$bad" ] && exit 0
  echo "$bad" | sed "s|^|$(basename "$lower") |;s|defined by|defined by $(basename "$upper")'s|"
  exit 1
  ;;
beneath)
  dir=$2
  shift 2
  tops=$(printf '%s|' "$@")
  bad=$(grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"(${tops%|})/" "$dir"/*.c "$dir"/*.h 2>/dev/null)
  [ -z "$bad" ] && exit 0
  echo "$bad" | sed 's/^/includes a file above it: /'
  exit 1
  ;;
circles)
  lib=$2
  # edges A B (A needs a symbol B defines), then the transitive closure
  join -1 2 -2 2 <(needed "$lib" | sort -k2,2) <(defined "$lib" | sort -k2,2) |
    awk '$2 != $3 { print $2, $3 }' | sort -u | awk '
    { e[$1, $2] = 1; n[$1] = 1; n[$2] = 1 }
    END {
      for (k in n) for (i in n) if ((i, k) in e) for (j in n) if ((k, j) in e) e[i, j] = 1
      bad = 0
      for (i in n) for (j in n) if (i < j && (i, j) in e && (j, i) in e) { print "circle: " i " <-> " j; bad = 1 }
      exit bad
    }'
  ;;
*)
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
