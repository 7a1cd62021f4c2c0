"""The statistics a comparison of systems needs, in closed form where there is one.

* ``wilson``: the Wilson score interval of a pass rate (good at small n and near 0 or 1,
  where the normal approximation is not).
* ``mcnemar_exact``: the exact two-sided McNemar p-value of two systems on the same
  cases, from the discordant pairs only (a binomial test with p = 1/2).
  ``mcnemar_smallest_p`` is the least p any split of n discordant pairs can give (all on
  one side: 2 * 0.5**n), and ``mcnemar_fewest_discordant`` the fewest discordant pairs
  with which any split can be significant at a level (6 at 0.05).
* ``paired_bootstrap``: a percentile interval of the difference in pass rate, resampling
  cases (both systems' results of a case stay together).
* ``pass_at_k``: the unbiased estimator of pass@k from n samples with c passes
  (1 - C(n-c, k) / C(n, k)).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal
LEVEL = 0.05  # the report's significance level: a paired difference is shown when p < LEVEL


def wilson(passed: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of passed / n (0..1); (0, 1) when n is 0."""
    if n == 0:
        return 0.0, 1.0
    p = passed / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact p-value: how surprising the split of the discordant pairs is if
    neither system is better (1.0 when there are none)."""
    n = only_first + only_second
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_first, only_second) + 1)) / 2**n
    return min(1.0, 2 * tail)


def mcnemar_smallest_p(discordant: int) -> float:
    """The least exact two-sided p-value that ``discordant`` pairs can give: every one of
    them on the same side (1.0 when there are none)."""
    return min(1.0, 2 * 0.5**discordant)


def mcnemar_fewest_discordant(level: float = LEVEL) -> int:
    """The fewest discordant pairs with which some split has p < ``level``: with fewer,
    no difference between two systems can be shown, whatever the split."""
    if not 0.0 < level <= 1.0:
        raise ValueError(f"a significance level is in (0, 1], not {level}")
    discordant = 0
    while mcnemar_smallest_p(discordant) >= level:
        discordant += 1
    return discordant


def paired_bootstrap(
    first: Sequence[bool], second: Sequence[bool], repeats: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """The difference in pass rate (first - second) over the same cases, and its
    percentile interval from resampling cases with their pair of results."""
    if len(first) != len(second):
        raise ValueError("paired samples must have one result of each system per case")
    n = len(first)
    if n == 0:
        return 0.0, 0.0, 0.0
    differences = [int(a) - int(b) for a, b in zip(first, second)]
    observed = sum(differences) / n
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(differences, k=n)) / n for _ in range(repeats))
    low = means[int(math.floor((1 - level) / 2 * (repeats - 1)))]
    high = means[int(math.ceil((1 + level) / 2 * (repeats - 1)))]
    return observed, low, high


def pass_at_k(samples: int, passes: int, k: int) -> float:
    """Unbiased pass@k from ``samples`` runs of one case of which ``passes`` passed."""
    if not 0 <= passes <= samples or not 1 <= k <= samples:
        raise ValueError(f"pass@{k} needs 1 <= k <= n and 0 <= c <= n (n={samples}, c={passes})")
    if samples - passes < k:
        return 1.0
    return 1.0 - math.comb(samples - passes, k) / math.comb(samples, k)
