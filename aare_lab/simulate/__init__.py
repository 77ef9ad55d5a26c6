"""Simulated runs with ground truth: frames of a charge-integrating hybrid pixel detector
(`aare_lab.simulate.simulator`) and JUNGFRAU's dynamic gain switching
(`aare_lab.simulate.jungfrau`)."""

from .jungfrau import GainStageMaps, JungfrauBeam, JungfrauDetector, JungfrauSimulator
from .simulator import (
    Beam,
    Detector,
    DetectorMaps,
    Edge,
    SimulatedRun,
    Simulator,
    Slit,
    Truth,
    simulate_run,
)

__all__ = [
    "Beam", "Detector", "DetectorMaps", "Edge", "GainStageMaps", "JungfrauBeam",
    "JungfrauDetector", "JungfrauSimulator", "SimulatedRun", "Simulator", "Slit", "Truth",
    "simulate_run",
]
