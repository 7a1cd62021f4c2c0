import numpy as np
import pytest

from pytest_pdebench import metrics


def fields(*arrays):
    return np.stack(arrays, axis=-1)


def test_relative_l2_ignores_invalid_points():
    ref = fields(np.array([[3.0, 4.0], [100.0, 0.0]]))
    u = fields(np.array([[3.0, 4.4], [-7.0, 0.0]]))
    mask = np.array([[True, True], [False, True]])
    # ||diff|| = 0.4 over valid points, ||ref|| = 5
    assert metrics.relative_l2_error(u, ref, mask) == pytest.approx(0.08)


def test_relative_l2_runs_over_components_together():
    mask = np.ones((1, 2), dtype=bool)
    ref = fields(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0]]))
    u = fields(np.array([[1.0, 0.0]]), np.array([[0.0, 2.0]]))
    assert metrics.relative_l2_error(u, ref, mask) == pytest.approx(1 / np.sqrt(2))


def test_zero_reference_falls_back_to_absolute_error():
    mask = np.ones((2, 2), dtype=bool)
    ref = fields(np.zeros((2, 2)))
    u = fields(np.full((2, 2), 1e-13))
    assert metrics.relative_l2_error(u, ref, mask) == pytest.approx(2e-13 / metrics.EPS_NORM)


def test_rmse_mae_r2_known_values():
    mask = np.ones((1, 4), dtype=bool)
    ref = fields(np.array([[1.0, 2.0, 3.0, 4.0]]))
    u = fields(np.array([[1.0, 2.0, 3.0, 6.0]]))
    assert metrics.rmse(u, ref, mask) == pytest.approx(1.0)
    assert metrics.mae(u, ref, mask) == pytest.approx(0.5)
    assert metrics.r2(u, ref, mask) == pytest.approx(1 - 4 / 5)


def test_r2_is_none_for_a_constant_reference():
    mask = np.ones((2, 2), dtype=bool)
    assert metrics.r2(fields(np.ones((2, 2))), fields(np.ones((2, 2))), mask) is None


def test_frequency_rmse_equals_spatial_rmse_over_the_full_grid():
    # Parseval: with the orthonormal DFT the two agree when every point is valid
    rng = np.random.default_rng(0)
    ref, u = fields(rng.normal(size=(8, 8))), fields(rng.normal(size=(8, 8)))
    mask = np.ones((8, 8), dtype=bool)
    assert metrics.frequency_rmse(u, ref, mask) == pytest.approx(metrics.rmse(u, ref, mask))


def test_total_variation_counts_only_valid_neighbours():
    u = fields(np.array([[0.0, 1.0, 3.0]]))
    assert metrics.total_variation(u, np.array([[True, True, True]])) == pytest.approx(3.0)
    assert metrics.total_variation(u, np.array([[True, True, False]])) == pytest.approx(1.0)
