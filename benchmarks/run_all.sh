#!/bin/sh
# Run every sitegen benchmark and regenerate docs/benchmarks.md.
#   benchmarks/run_all.sh            # full inputs (~25 min on 2 cores for the 500-run build)
#   benchmarks/run_all.sh --quick    # smoke run on 10x smaller inputs
# Extra arguments go to both scripts (only --quick is understood by both).
set -eu
cd "$(dirname "$0")/.."
# OpenBLAS tuning variables must not leak into the measured processes.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
python -c "import tbparse, tensorboard_data_server, tensorboardX, psutil, grpc" 2>/dev/null || {
  echo "missing benchmark dependencies: pip install tbparse tensorboard-data-server tensorboardX psutil grpcio" >&2
  exit 2
}
python benchmarks/bench_readers.py "$@"
python benchmarks/bench_build.py "$@"
