"""Error metrics on the valid points of the evaluation grid (paper, Appendix H).

Every function takes component arrays of the grid's shape, stacked on the last axis
(shape ``grid_shape + (c,)``), and the boolean valid-point mask of ``grid_shape``.
Norms run over valid points and components together.
"""

from __future__ import annotations

import numpy as np

EPS_NORM = 1e-12


def _valid(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return values[mask]  # (N, c)


def relative_l2_error(u: np.ndarray, reference: np.ndarray, mask: np.ndarray, eps_norm: float = EPS_NORM) -> float:
    """||u - ref|| / max(||ref||, eps_norm) over valid points and components."""
    diff = _valid(u, mask) - _valid(reference, mask)
    return float(np.linalg.norm(diff) / max(np.linalg.norm(_valid(reference, mask)), eps_norm))


def rmse(u: np.ndarray, reference: np.ndarray, mask: np.ndarray) -> float:
    return float(np.sqrt(np.mean((_valid(u, mask) - _valid(reference, mask)) ** 2)))


def mae(u: np.ndarray, reference: np.ndarray, mask: np.ndarray) -> float:
    return float(np.mean(np.abs(_valid(u, mask) - _valid(reference, mask))))


def r2(u: np.ndarray, reference: np.ndarray, mask: np.ndarray) -> float | None:
    """Coefficient of determination; None for a (nearly) constant reference."""
    ref = _valid(reference, mask)
    total = float(np.sum((ref - ref.mean()) ** 2))
    if total <= EPS_NORM**2 * max(1, ref.size):
        return None
    return 1.0 - float(np.sum((_valid(u, mask) - ref) ** 2)) / total


def frequency_rmse(u: np.ndarray, reference: np.ndarray, mask: np.ndarray) -> float:
    """RMSE between orthonormal DFTs of the fields, invalid points zeroed first."""
    spatial_axes = tuple(range(mask.ndim))
    weight = mask[..., None]
    u_hat = np.fft.fftn(np.where(weight, u, 0.0), axes=spatial_axes, norm="ortho")
    ref_hat = np.fft.fftn(np.where(weight, reference, 0.0), axes=spatial_axes, norm="ortho")
    return float(np.sqrt(np.mean(np.abs(u_hat - ref_hat) ** 2)))


def total_variation(u: np.ndarray, mask: np.ndarray) -> float:
    """Sum of |differences| between neighbouring valid grid values, all axes and components."""
    total = 0.0
    for axis in range(mask.ndim):
        both = np.logical_and(
            np.take(mask, range(1, mask.shape[axis]), axis=axis),
            np.take(mask, range(0, mask.shape[axis] - 1), axis=axis),
        )
        diff = np.abs(np.diff(u, axis=axis))
        total += float(np.sum(diff[both]))
    return total


def diagnostics(u: np.ndarray, reference: np.ndarray, mask: np.ndarray) -> dict:
    """The auxiliary metrics reported with every executed submission."""
    return {
        "rmse": rmse(u, reference, mask),
        "mae": mae(u, reference, mask),
        "r2": r2(u, reference, mask),
        "frmse": frequency_rmse(u, reference, mask),
        "total_variation": total_variation(u, mask),
    }
