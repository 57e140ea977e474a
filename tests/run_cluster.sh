#!/usr/bin/env bash
# `make test-cluster`: every lesson across emulated nodes (tests/suite_cluster.sh
# with the full set; tools/cluster.sh makes the nodes). Ends with
# "N passed, N failed" like make test.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
echo "test-cluster: $(tools/cluster.sh check 2>&1)"
CLUSTER_SET=full
source tests/suite_cluster.sh
summary
