"""docs/campaigns.md's SLURM example builds a dask_jobqueue.SLURMCluster whose batch script
asks for what the text says (no SLURM needed: the script is only rendered)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "campaigns.md"


def slurm_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    (block,) = [b for b in blocks if "SLURMCluster(" in b]
    return block


def test_the_slurm_example_renders_its_job_script():
    pytest.importorskip("dask_jobqueue", reason="dask-jobqueue is not installed "
                                                "(pip install dask-jobqueue)")
    names: dict = {}
    exec(slurm_example(), names)
    cluster = names["cluster"]
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    directives = re.findall(r"^#SBATCH (.*)$", script, re.MULTILINE)
    assert {"-p gpu", "-A p12345", "--cpus-per-task=16", "-t 04:00:00", "--gpus=1"} <= \
        set(directives)
    assert "source ~/venvs/aare_lab/bin/activate" in script
    worker = script.strip().splitlines()[-1]
    assert "distributed.cli.dask_worker" in worker and "--nthreads 1" in worker
    assert cluster.scheduler_address in worker
