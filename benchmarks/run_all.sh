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
# The other benchmarks print their own tables; their output is kept in benchmarks/results/ and
# copied verbatim into docs/benchmarks.md.
mkdir -p benchmarks/results
python benchmarks/bench_visualdl.py | tee benchmarks/results/visualdl.txt
python benchmarks/bench_index.py --runs 10000 | tee benchmarks/results/index-10000-runs.txt
python benchmarks/bench_dask.py --quick | tee benchmarks/results/dask.txt
python benchmarks/bench_pages.py  # (writes benchmarks/results/pages.txt)
python -c "import sys; sys.path.insert(0, 'benchmarks'); import common; common.write_doc()"
