"""A seeded simulator of a checkpointing job under random interruptions, to check the advisor.

Interruptions form a renewal process in wall time: the time from one to the next is drawn
from a distribution (exponential, Weibull, log-normal) with a given mean. The job computes
`tau` seconds, blocks `save_s` on a checkpoint, and repeats; an interruption loses the work
since the last checkpoint and costs `recovery_s` (restarted if another interruption hits it).
The same seed gives the same interruption times whatever the interval, so intervals are
compared on one shared history (common random numbers).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

Draw = Callable[[random.Random], float]


def exponential(mean_s: float) -> Draw:
    return lambda rng: rng.expovariate(1.0 / mean_s)


def weibull(mean_s: float, shape: float) -> Draw:
    """Weibull with this mean; shape < 1 is heavy-tailed (interruptions come in bursts)."""
    scale = mean_s / math.gamma(1.0 + 1.0 / shape)
    return lambda rng: rng.weibullvariate(scale, shape)


def lognormal(mean_s: float, sigma: float) -> Draw:
    mu = math.log(mean_s) - sigma * sigma / 2.0
    return lambda rng: rng.lognormvariate(mu, sigma)


def simulate(tau: float, save_s: float, recovery_s: float, work_s: float, draw: Draw, seed: int) -> float:
    """The goodput (work_s / wall time) of one simulated job of `work_s` seconds of work."""
    if not (tau > 0 and work_s > 0 and save_s >= 0 and recovery_s >= 0):
        raise ValueError("need tau > 0, work_s > 0, save_s >= 0, recovery_s >= 0")
    rng = random.Random(seed)
    wall = 0.0
    kept = 0.0
    nxt = draw(rng)
    cycle = tau + save_s
    while True:
        left = nxt - wall  # time until the next interruption
        need = work_s - kept
        full = math.floor(left / cycle)
        if full * tau >= need:
            k = math.ceil(need / tau)
            return work_s / (wall + (k - 1) * cycle + (need - (k - 1) * tau))
        rest = left - full * cycle
        if need - full * tau <= min(rest, tau):
            return work_s / (wall + full * cycle + (need - full * tau))
        kept += full * tau
        wall = nxt
        nxt = wall + draw(rng)
        while nxt - wall < recovery_s:  # interrupted while recovering: start over
            wall = nxt
            nxt = wall + draw(rng)
        wall += recovery_s
