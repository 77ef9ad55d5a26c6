"""The frozen finder's bands cut by their threads' rates (`aare_lab.finders._bands`): where
the rows go for given band times. That any cut gives the same clusters is
`test_frozen_bands`'s."""

import platform

import numpy as np
import pytest

from aare_lab.finders._bands import RISE, STEP, counter, even_bands, rebalance


def frame(bounds, ticks, cost, per_row):
    """One frame whose band ``b`` took ``per_row[b]`` ticks a row, then the new cut."""
    ticks[:] = np.diff(bounds) * np.asarray(per_row)
    rebalance(bounds, ticks, cost)


def test_even_bands_cover_the_rows_once():
    bounds, ticks, cost = even_bands(3, 10)
    assert bounds.tolist() == [0, 3, 6, 10]
    assert ticks.tolist() == [0, 0, 0] and cost.tolist() == [0, 0, 0]


def test_a_thread_at_half_rate_gets_half_the_rows():
    bounds, ticks, cost = even_bands(4, 100)
    frame(bounds, ticks, cost, [1000, 1000, 1000, 2000])
    # Rates 1, 1, 1, 0.5 of 3.5: 28.57 rows each and 14.29, rounded where they end.
    assert bounds.tolist() == [0, 29, 57, 86, 100]
    frame(bounds, ticks, cost, [1000, 1000, 1000, 2000])
    assert bounds.tolist() == [0, 29, 57, 86, 100]


def test_equal_rates_keep_even_bands():
    bounds, ticks, cost = even_bands(16, 400)
    for _ in range(5):
        frame(bounds, ticks, cost, [500] * 16)
    assert (np.diff(bounds) == 25).all()


def test_one_slow_frame_moves_the_cost_by_a_bounded_step():
    bounds, ticks, cost = even_bands(2, 400)
    frame(bounds, ticks, cost, [1000, 1000])
    assert bounds.tolist() == [0, 200, 400]
    # A band that lost its core for a moment: 100 times its time.
    frame(bounds, ticks, cost, [1000, 100_000])
    assert cost[1] == pytest.approx(1000 * (1 + RISE * (STEP - 1)))
    assert bounds[1] == round(400 * (1 / 1000) / (1 / 1000 + 1 / cost[1]))
    assert 200 < bounds[1] < 210
    # The next frame at full rate takes the cost back down at once.
    frame(bounds, ticks, cost, [1000, 1000])
    assert cost.tolist() == [1000, 1000] and bounds.tolist() == [0, 200, 400]


def test_a_faster_frame_lowers_the_cost_at_once():
    bounds, ticks, cost = even_bands(2, 300)
    frame(bounds, ticks, cost, [2000, 1000])
    assert bounds.tolist() == [0, 100, 300]
    frame(bounds, ticks, cost, [1000, 1000])
    assert bounds.tolist() == [0, 150, 300]


def test_the_cost_follows_a_lasting_change():
    bounds, ticks, cost = even_bands(2, 300)
    frame(bounds, ticks, cost, [1000, 1000])
    for _ in range(30):
        frame(bounds, ticks, cost, [1000, 2000])
    assert cost[1] == pytest.approx(2000, rel=0.15)
    for _ in range(100):
        frame(bounds, ticks, cost, [1000, 2000])
    assert cost[1] == pytest.approx(2000, rel=1e-3)
    assert bounds.tolist() == [0, 200, 300]


def test_every_band_keeps_a_row():
    slow, fast = 10**9, 1
    bounds, ticks, cost = even_bands(5, 12)
    cost[:] = [slow, slow, slow, slow, fast]
    frame(bounds, ticks, cost, cost)
    assert bounds.tolist() == [0, 1, 2, 3, 4, 12]
    cost[:] = [fast, slow, slow, slow, slow]
    frame(bounds, ticks, cost, cost)
    assert bounds.tolist() == [0, 8, 9, 10, 11, 12]


@pytest.mark.parametrize("ticks_of_a_band", [0, -5])
def test_a_frame_without_a_time_leaves_the_cut(ticks_of_a_band):
    """No counter (reads 0), or one read on two CPUs whose counters differ."""
    bounds, ticks, cost = even_bands(3, 30)
    frame(bounds, ticks, cost, [1000, 1000, 3000])
    before = bounds.copy(), cost.copy()
    ticks[:] = [5000, ticks_of_a_band, 5000]
    rebalance(bounds, ticks, cost)
    np.testing.assert_array_equal(bounds, before[0])
    np.testing.assert_array_equal(cost, before[1])


def test_one_band_is_left_alone():
    bounds, ticks, cost = even_bands(1, 7)
    ticks[:] = 100
    rebalance(bounds, ticks, cost)
    assert bounds.tolist() == [0, 7] and cost.tolist() == [0]


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="the cycle counter is read on x86-64 only; elsewhere it reads 0")
def test_the_counter_runs():
    first = counter()
    sum(range(100_000))
    assert counter() > first > 0
