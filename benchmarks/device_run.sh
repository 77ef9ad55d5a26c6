#!/usr/bin/env bash
# On the GPU machine (see README "GPU"): install the carried wheels, run the GPU tests
# against the installed wheel (so the shipped kernels are the ones tested), then the GPU
# benchmark. Logs and results go to $OUT (default ./out).
#   usage: bash benchmarks/device_run.sh [tests|bench|live|disk|write|variants|exchange|breakdown|ab|cpu|profile|all] [options...]
# ab: find_breakdown.py (this tree's script) on an older tree's wheel, carried in .whl/old/
# (AARE_LAB_OLD_COMMIT names it), and on this one, alternately, twice each, one process
# each, on the same machine: a before/after of find() that one host's noise cannot fake.
set -uo pipefail
what=${1:-all}; shift || true
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$repo/out}; mkdir -p "$out"
# The carried wheels of packages the image lacks (the image's own are kept: its numpy,
# numba and friends are built together), and always aare_lab's.
missing=$(python3 - "$repo"/.whl/*.whl <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
for wheel in (w for w in sys.argv[1:] if "/aare_lab-" not in w):
    name = wheel.rsplit("/", 1)[-1].split("-")[0]
    try:
        version(name)
        print("have", name, file=sys.stderr)
    except PackageNotFoundError:
        print(wheel)
PY
)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site $missing "$repo"/.whl/aare_lab-*.whl || exit 1
export PYTHONPATH=/tmp/site AARE_PYTHON_2026_9_30=$(command -v python3) PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
(cd /tmp && python3 -c "import aare_lab, aare_lab.gpu.kernels as k; print('testing', aare_lab.__file__, 'kernels from', k.kernel_dir())")
status=0
if [[ $what == tests || $what == all ]]; then
    (cd /tmp && python3 -m pytest -m gpu -p no:cacheprovider -q -ra \
        "$repo"/tests/test_{cuda,common_mode,jungfrau_finder,widgets_gpu,window_int16,live_calibration,gain_bits,imaging_gpu,campaign_gpu,skip_first}.py \
        --junitxml="$out/gpu_tests.xml" 2>&1 | tee "$out/gpu_tests.log") || status=1
fi
if [[ $what == bench || $what == all ]]; then
    (cd /tmp && python3 "$repo/benchmarks/gpu_pipeline.py" --out "$out" "$@" 2>&1 \
        | tee -a "$out/gpu_pipeline.log") || status=1
fi
if [[ $what == live || $what == all ]]; then
    # publisher -> StreamSource -> cuda finder on loopback, beside the bare ZeroMQ limit
    (cd /tmp && python3 "$repo/benchmarks/live_stream.py" --finder cuda --out "$out" 2>&1 \
        | tee -a "$out/live_stream.log") || status=1
fi
if [[ $what == disk || $what == all ]]; then
    # a million MÖNCH frames found and written to disk as they come, memory sampled
    (cd /tmp && python3 "$repo/benchmarks/find_to_disk.py" --finder cuda --shape 400x400 --photons 230 \
        --dir /tmp/disk --out "$out" 2>&1 | tee -a "$out/find_to_disk.log") || status=1
fi
if [[ $what == write || $what == all ]]; then
    # results to disk by compression and window dtype, beside the disk's own rate
    (cd /tmp && python3 "$repo/benchmarks/result_write.py" --finder cuda --dir /tmp --out "$out" "$@" 2>&1 \
        | tee -a "$out/result_write.log") || status=1
fi
if [[ $what == variants ]]; then
    (cd /tmp && python3 "$repo/benchmarks/kernel_variants.py" --out "$out" "$@" 2>&1 \
        | tee -a "$out/kernel_variants.log") || status=1
fi
if [[ $what == exchange ]]; then
    # both exchanges of edge rows on the device paths, alternately in one process
    (cd /tmp && python3 "$repo/benchmarks/exchange_ab.py" --out "$out" "$@" 2>&1 \
        | tee -a "$out/exchange_ab.log") || status=1
fi
if [[ $what == breakdown ]]; then
    # where the time of find() into the result Dataset goes, stage by stage
    (cd /tmp && python3 "$repo/benchmarks/find_breakdown.py" --out "$out" "$@" 2>&1 \
        | tee -a "$out/find_breakdown.log") || status=1
fi
if [[ $what == ab ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site_old "$repo"/.whl/old/aare_lab-*.whl || exit 1
    for round in 1 2; do
        for tree in old new; do
            if [[ $tree == old ]]; then path=/tmp/site_old:/tmp/site commit=${AARE_LAB_OLD_COMMIT:-old}
            else path=/tmp/site commit=${AARE_LAB_COMMIT:-new}; fi
            echo "== round $round: $tree ($commit)"
            (cd /tmp && AARE_LAB_COMMIT=$commit PYTHONPATH=$path python3 \
                "$repo/benchmarks/find_breakdown.py" --out "$out" "$@" 2>&1 \
                | tee -a "$out/find_breakdown_ab.log") || status=1
        done
    done
fi
if [[ $what == cpu ]]; then
    # cpu_finders.py on this host's cores against aare: 2026.9.30 from the carried wheel in
    # /tmp/site, 2026.3.17 (the serial model's reference) from .whl/aare-2026.3.17/ in a site
    # of its own; a carried .whl/base.tar (git archive of another commit) is unpacked to
    # /tmp/ab_base for --ab /tmp/ab_base.
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site_aare_2026_3_17 "$repo"/.whl/aare-2026.3.17/*.whl || exit 1
    printf '#!/bin/sh\nPYTHONPATH=/tmp/site_aare_2026_3_17 exec python3 "$@"\n' \
        > /tmp/python_aare_2026_3_17
    chmod +x /tmp/python_aare_2026_3_17
    if [[ -f $repo/.whl/base.tar ]]; then
        mkdir -p /tmp/ab_base && tar -xf "$repo/.whl/base.tar" -C /tmp/ab_base
    fi
    (cd "$repo" && AARE_PYTHON_2026_3_17=/tmp/python_aare_2026_3_17 python3 \
        benchmarks/cpu_finders.py --out "$out" "$@" 2>&1 | tee -a "$out/cpu_finders.log") \
        || status=1
fi
if [[ $what == profile ]]; then
    # Nsight Compute on one warm launch of the shipped kernel (float32, 3x3, unless options
    # for kernel_variants.py say otherwise): the summary sections, then where the warps
    # stall, line by line of the source (compiled with -lineinfo) and instruction by instruction.
    ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
    (cd /tmp && "$ncu" --clock-control none --kernel-name frozen_chunk --launch-skip 2 \
        --launch-count 1 --section SpeedOfLight --section WarpStateStats \
        --section SchedulerStats --section LaunchStats --section Occupancy \
        --section MemoryWorkloadAnalysis --section SourceCounters --import-source yes \
        --export "$out/frozen_chunk" --force-overwrite \
        python3 "$repo/benchmarks/kernel_variants.py" --frames 1024 --repeats 1 \
        --dtypes float32 --sizes 3x3 --variants "as shipped" --lineinfo --out /tmp/ncu_out "$@" \
        > "$out/ncu.txt" 2>&1) || status=1
    "$ncu" --import "$out/frozen_chunk.ncu-rep" --page details > "$out/ncu_details.txt" 2>&1
    # The kernel was compiled from a temporary copy of its source: resolve it from kernels/
    # (--source-folders is not yet seen working here; the SASS page below is).
    "$ncu" --import "$out/frozen_chunk.ncu-rep" --page source --print-source cuda --csv \
        --source-folders "$repo/kernels" > "$out/ncu_source_cuda.csv" 2>&1
    "$ncu" --import "$out/frozen_chunk.ncu-rep" --page source --print-source sass --csv \
        > "$out/ncu_source_sass.csv" 2>&1
    tail -n 60 "$out/ncu.txt"; head -c 3000 "$out/ncu_source_cuda.csv"
fi
exit $status
