#!/usr/bin/env bash
# tools/cluster.sh: emulated nodes on one Linux machine, for running and
# testing the lessons "across several machines" without a cluster.
#
#   tools/cluster.sh check                 exit 0 when emulated nodes work here,
#                                          77 (skip) with the reason when not
#   tools/cluster.sh [OPTIONS] -- CMD ...  bring up the nodes, run CMD, tear down
#
# Options:
#   --nodes N          nodes (default 2), named node0 .. node<N-1>
#   --slots S          ranks per node in the hostfile (default 2)
#   --rate R           shape every node's link to R per direction with tc tbf
#                      (e.g. 1gbit, 200mbit; default: unshaped)
#   --delay D          add a one-way delay with netem (e.g. 1ms), where the kernel
#                      has sch_netem; refused (exit 77) where it has not
#   --mode M           netns (default when allowed), loopback, or auto: netns
#                      when the machine allows it, else loopback
#
# A node (netns mode) is a network namespace and a UTS namespace: its own
# hostname node<i>, its own eth0 at 10.77.0.<i+1>/24, joined to the others by
# a bridge through a veth pair. Open MPI starts its daemons in them through
# a launch agent (nsenter) in place of ssh: between nodes the ranks talk TCP
# over the veths, inside a node shared memory. Everything lives inside one
# private namespace made for the run (network, mount, UTS and PID): mpirun's
# own side of the bridge has no route anywhere else, so no packet can leave,
# and when the run ends, or its launcher is killed, even with SIGKILL, the
# kernel removes every process, interface, qdisc, tmpfs and shared-memory
# file with it. Nothing is written outside that namespace.
#
# Loopback mode needs no privilege: the same hostfile, a local launch agent,
# TCP over 127.0.0.1 between the "nodes" and a shared-memory directory per
# node (without it their segments collide by name). Every rank then shows the
# real hostname and the link cannot be shaped: for correctness only.
#
# CMD runs with: CLUSTER_MODE (netns|loopback), CLUSTER_NODES, CLUSTER_SLOTS,
# CLUSTER_HOSTS ("node0 node1"), CLUSTER_HOSTFILE, CLUSTER_RATE, CLUSTER_DIR,
# CLUSTER_LINKS (netns: the bridge-side interface of each node, "vn0 vn1";
# their /proc/net/dev counters are the bytes crossing each node's link), and
# the Open MPI settings as OMPI_MCA_* variables, so a plain
# `mpirun --hostfile "$CLUSTER_HOSTFILE" -np 4 ./05_dp/dp` runs across them.
#
# Test hook: CLUSTER_DENY=reason makes the check fail with that reason, to
# test the skip and the fallback paths on a machine that allows namespaces.
set -u
SELF=$(cd "$(dirname "$0")" && pwd -P)/$(basename "$0") # readlink -f is GNU
SUBNET=10.77.0
SKIP=77

die() {
  echo "cluster: $*" >&2
  exit 2
}
skip() {
  echo "cluster: skipped: $*" >&2
  exit $SKIP
}

# allreduce_rules DIR: Open MPI's rules file (collective 2 = allreduce; per
# communicator size from: "message size, algorithm, fan, segment size";
# algorithm 3 = recursive doubling, 4 = ring)
allreduce_rules() {
  printf '%s\n' 1 2 2 2 1 '0 3 0 0' 3 1 '0 4 0 0' >"$1/allreduce.rules"
  export OMPI_MCA_coll_tuned_dynamic_rules_filename=$1/allreduce.rules
}

# ---- what the machine allows --------------------------------------------------------
# Try the real operations (namespaces, veth, bridge, tbf, tmpfs) in a
# throwaway namespace; print why not and return 1 when one fails.
userns_flags() { [ "$(id -u)" = 0 ] || echo "--user --map-root-user"; }
probe() {
  if [ -n "${CLUSTER_DENY:-}" ]; then
    echo "namespaces refused by CLUSTER_DENY ($CLUSTER_DENY)"
    return 1
  fi
  local c
  for c in unshare nsenter setpriv ip tc mpirun; do
    command -v $c >/dev/null 2>&1 || {
      echo "'$c' not found (util-linux, iproute2, openmpi-bin)"
      return 1
    }
  done
  local out
  # shellcheck disable=SC2046
  out=$(unshare $(userns_flags) --net --mount --uts --pid --fork --mount-proc sh -c '
    set -e
    mount -t tmpfs cluster-probe /run
    ip link add probe0 type veth peer name probe1
    ip link add probebr type bridge
    ip link set probe0 master probebr
    tc qdisc add dev probe1 root tbf rate 200mbit burst 32kb latency 50ms
    mkdir /run/netns && ip netns add probe && touch /run/uts && unshare --uts=/run/uts true
  ' 2>&1) || {
    echo "this machine forbids network namespaces for this user: $(echo "$out" | tail -n 1)"
    return 1
  }
  return 0
}

if [ "${1:-}" = check ]; then
  why=$(probe) || skip "$why"
  echo "cluster: emulated nodes are available (network, UTS, mount and PID namespaces; veth, bridge, tbf)"
  exit 0
fi

# ---- options ------------------------------------------------------------------------
NODES=2 SLOTS=2 RATE="" DELAY="" MODE=${CLUSTER_MODE_WANTED:-netns}
while [ $# -gt 0 ]; do
  case $1 in
  --nodes | --slots | --rate | --delay | --mode) [ $# -ge 2 ] || die "$1 needs a value" ;;
  esac
  case $1 in
  --nodes) NODES=${2:-}; shift 2 ;;
  --slots) SLOTS=${2:-}; shift 2 ;;
  --rate) RATE=${2:-}; shift 2 ;;
  --delay) DELAY=${2:-}; shift 2 ;;
  --mode) MODE=${2:-}; shift 2 ;;
  --inside) break ;;
  --) shift; break ;;
  -h | --help)
    sed -n '2,/^set -u/p' "$SELF" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  *) die "unknown option '$1' (see --help)" ;;
  esac
done


# ---- inside the private namespace (netns mode) -------------------------------------
if [ "${1:-}" = --inside ]; then
  shift
  set -e
  D=/run/cluster
  mount -t tmpfs cluster-run /run # netns and UTS handles, agent, hostfile, session dirs
  mount -t tmpfs cluster-shm /dev/shm
  mkdir -p $D/tmp /run/netns $D/uts
  hostname head
  ip link set lo up
  ip link add br0 type bridge
  ip addr add $SUBNET.254/24 dev br0
  ip link set br0 up
  links=() hosts=()
  for ((i = 0; i < NODES; i++)); do
    n=node$i
    ip netns add $n
    ip link add vn$i type veth peer name eth0 netns $n
    ip link set vn$i master br0 up
    ip -n $n link set lo up
    ip -n $n addr add $SUBNET.$((i + 1))/24 dev eth0
    ip -n $n link set eth0 up
    touch $D/uts/$n
    unshare --uts=$D/uts/$n hostname $n
    if [ -n "$RATE" ]; then # both ends: what the node sends, what it receives
      tc qdisc add dev vn$i root tbf rate "$RATE" burst 32kb latency 100ms
      tc -n $n qdisc add dev eth0 root tbf rate "$RATE" burst 32kb latency 100ms
    fi
    if [ -n "$DELAY" ]; then # netem as the child of tbf would need a handle; here it is alone
      [ -z "$RATE" ] || { echo "cluster: --delay with --rate is not supported" >&2; exit 2; }
      tc -n $n qdisc add dev eth0 root netem delay "$DELAY"
    fi
    echo "$n slots=$SLOTS" >>$D/hostfile
    links+=(vn$i) hosts+=($n)
  done
  allreduce_rules $D
  cat >$D/agent <<'EOF'
#!/bin/sh
# Open MPI's launch agent in place of ssh: "agent HOST COMMAND..." runs
# COMMAND inside HOST's network and UTS namespaces.
host=$1
shift
exec nsenter --net=/run/netns/"$host" --uts=/run/cluster/uts/"$host" sh -c "$*"
EOF
  chmod +x $D/agent
  # wait until every node answers on the bridge (a few ms)
  for ((i = 0; i < NODES; i++)); do
    for t in 1 2 3 4 5 6 7 8 9 10; do
      ip netns exec node$i ip -4 addr show eth0 | grep -q "$SUBNET" && break
      sleep 0.1
    done
  done
  export CLUSTER_MODE=netns CLUSTER_DIR=$D CLUSTER_HOSTFILE=$D/hostfile
  export CLUSTER_HOSTS="${hosts[*]}" CLUSTER_LINKS="${links[*]}"
  export OMPI_MCA_plm_rsh_agent=$D/agent
  export OMPI_MCA_btl_tcp_if_include=$SUBNET.0/24 OMPI_MCA_oob_tcp_if_include=$SUBNET.0/24
  export OMPI_MCA_orte_tmpdir_base=$D/tmp
  set +e
  "$@"
  exit $?
fi

# ---- outside: common settings, then netns or loopback ------------------------------
[ $# -gt 0 ] || die "no command given: tools/cluster.sh [OPTIONS] -- CMD ..."
[[ $NODES =~ ^[1-9][0-9]?$ ]] || die "--nodes '$NODES': a whole number from 1 to 99"
[[ $SLOTS =~ ^[1-9][0-9]?$ ]] || die "--slots '$SLOTS': a whole number from 1 to 99"
[ -z "$RATE" ] || [[ $RATE =~ ^[0-9]+(\.[0-9]+)?[kmg]?(bit|bps)$ ]] ||
  die "--rate '$RATE': a tc rate such as 1gbit or 200mbit"
[ -z "$DELAY" ] || [[ $DELAY =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] ||
  die "--delay '$DELAY': a tc time such as 1ms"

export CLUSTER_NODES=$NODES CLUSTER_SLOTS=$SLOTS CLUSTER_RATE=${RATE:-unshaped}
# The Open MPI settings that decide the outcome (see docs/several-machines.md,
# "Emulated nodes on one machine"): shared memory inside a node, TCP between nodes on the
# nodes' own interfaces only; two TCP connections per pair (one lets a pair
# that exchanges both ways get about half the link); no binding (each node's
# daemon would pin its ranks from core 0, all nodes on the same cores); yield
# when idle (Open MPI cannot see that the nodes share cores: a busy-polling
# rank steals the core its peer needs); for MPI_Allreduce the ring from 3
# ranks up (among 3 node leaders Open MPI's default choice lost to the flat
# ring) and between 2 ranks recursive doubling (the same bytes, S each way;
# the ring's time on a shaped link jumped between 1.0x and 1.9x its best
# from run to run): the rules file written below.
export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_links=2
export OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_mpi_yield_when_idle=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_plm_rsh_no_tree_spawn=1
export OMPI_MCA_coll_tuned_use_dynamic_rules=1
# root, or root inside a user namespace (unprivileged netns mode)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if [ "$MODE" = auto ]; then
  if why=$(probe); then MODE=netns; else
    echo "cluster: $why; falling back to loopback nodes (correctness only: one hostname, no link shaping)" >&2
    MODE=loopback
  fi
fi
case $MODE in
netns)
  why=$(probe) || skip "$why"
  if [ -n "$DELAY" ]; then
    # shellcheck disable=SC2046
    unshare $(userns_flags) --net sh -c 'ip link add d0 type dummy && tc qdisc add dev d0 root netem delay 1ms' \
      >/dev/null 2>&1 || skip "--delay needs the kernel's sch_netem, which this kernel lacks"
  fi
  # When unshare dies, --kill-child kills PID 1 of the namespace and with it
  # every process of the run. unshare itself ignores SIGTERM and SIGINT, so
  # this script turns them into SIGKILL for it; and if this script is killed
  # with SIGKILL, the kernel sends unshare SIGKILL too (pdeathsig).
  # shellcheck disable=SC2046
  setpriv --pdeathsig KILL unshare $(userns_flags) --net --mount --uts --pid --fork --kill-child \
    --mount-proc "$SELF" --nodes "$NODES" --slots "$SLOTS" --rate "$RATE" --delay "$DELAY" \
    --inside "$@" &
  launcher=$!
  trap 'kill -KILL $launcher 2>/dev/null; wait $launcher; exit 143' TERM
  trap 'kill -KILL $launcher 2>/dev/null; wait $launcher; exit 130' INT
  trap 'kill -KILL $launcher 2>/dev/null; wait $launcher; exit 129' HUP
  wait $launcher
  exit $?
  ;;
loopback)
  [ -z "$RATE$DELAY" ] || skip "loopback nodes cannot shape a link (--rate/--delay need network namespaces)"
  command -v mpirun >/dev/null 2>&1 || skip "'mpirun' not found (openmpi-bin)"
  D=$(mktemp -d "${TMPDIR:-/tmp}/cluster.XXXXXX") || die "cannot create a temporary directory"
  trap 'rm -rf "$D"' EXIT
  trap 'exit 130' INT TERM
  hosts=()
  for ((i = 0; i < NODES; i++)); do
    echo "node$i slots=$SLOTS" >>"$D/hostfile"
    mkdir -p "$D/shm/node$i"
    hosts+=(node$i)
  done
  mkdir -p "$D/tmp/head"
  allreduce_rules "$D"
  # Each node's daemon gets its own session directory (TMPDIR) and shared-
  # memory directory: on one host with one hostname, two daemons creating the
  # same session directory at once failed in about one run in ten (mkdir
  # race, or a crash writing the same topology file), and the ranks' shared-
  # memory segments collide by name.
  cat >"$D/agent" <<EOF
#!/bin/sh
# Open MPI's launch agent for loopback nodes: "agent HOST COMMAND..." runs
# COMMAND here, with HOST's own session and shared-memory directories.
host=\$1
shift
mkdir -p "$D/tmp/\$host"
TMPDIR=$D/tmp/\$host OMPI_MCA_btl_vader_backing_directory=$D/shm/\$host exec sh -c "\$*"
EOF
  chmod +x "$D/agent"
  export CLUSTER_MODE=loopback CLUSTER_DIR=$D CLUSTER_HOSTFILE=$D/hostfile
  export CLUSTER_HOSTS="${hosts[*]}" CLUSTER_LINKS=""
  export OMPI_MCA_plm_rsh_agent=$D/agent TMPDIR=$D/tmp/head
  export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
  "$@"
  exit $?
  ;;
*) die "--mode '$MODE': netns, loopback or auto" ;;
esac
