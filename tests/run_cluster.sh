#!/usr/bin/env bash
# `make test-cluster`: every lesson across emulated nodes, tests/suite_cluster.sh
# alone (make test runs it too; tools/cluster.sh makes the nodes). Ends with
# "N passed, N failed" like make test.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
echo "test-cluster: $(tools/cluster.sh check 2>&1)"
source tests/suite_cluster.sh
summary
