"""The checkpoint-interval advisor: Young/Daly optimum and the goodput expected at an interval.

Model (docs/accounting.md, "Checkpoint interval"): the job computes for `tau` seconds, then
blocks `save_s` seconds on a checkpoint; interruptions arrive at random with mean time
`mtbi_s` between them (exponentially distributed); each one loses the work since the last
checkpoint and costs `recovery_s` before work resumes. The expected share of wall time that
becomes kept work is then (Daly 2006, exact for this model)

    G(tau) = tau / (M * exp(R / M) * (exp((tau + d) / M) - 1))

with M = mtbi_s, R = recovery_s, d = save_s. Young's first-order optimum is sqrt(2 d M);
Daly's higher-order one refines it; the advisor recommends the maximizer of G itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mlgoodput.accounting._figures import Productivity

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def expected_goodput(tau: float, save_s: float, mtbi_s: float, recovery_s: float = 0.0) -> float:
    """G(tau): the expected share of wall time kept as work at checkpoint interval `tau`."""
    if not (tau > 0 and mtbi_s > 0 and save_s >= 0 and recovery_s >= 0):
        raise ValueError(
            f"need tau > 0, mtbi_s > 0, save_s >= 0, recovery_s >= 0; got "
            f"{tau!r}, {mtbi_s!r}, {save_s!r}, {recovery_s!r}"
        )
    m = mtbi_s
    x = (tau + save_s) / m
    if x > 700 or recovery_s / m > 700:
        return 0.0
    return tau / (m * math.exp(recovery_s / m) * math.expm1(x))


def young_interval(save_s: float, mtbi_s: float) -> float:
    """Young (1974): sqrt(2 x save time x mean time between interruptions)."""
    return math.sqrt(2.0 * save_s * mtbi_s)


def daly_interval(save_s: float, mtbi_s: float) -> float:
    """Daly (2006)'s higher-order estimate of the optimum compute time between checkpoints."""
    d, m = save_s, mtbi_s
    if d >= 2.0 * m:
        return m
    r = d / (2.0 * m)
    return math.sqrt(2.0 * d * m) * (1.0 + math.sqrt(r) / 3.0 + r / 9.0) - d


def optimal_interval(save_s: float, mtbi_s: float, recovery_s: float = 0.0) -> float:
    """The tau that maximizes G (golden-section search; G is unimodal in tau)."""
    if save_s <= 0:
        return 0.0
    lo, hi = 1e-9 * mtbi_s, 10.0 * mtbi_s + 10.0 * save_s
    a, b = math.log(lo), math.log(hi)  # search in log(tau): the curve is flat and wide

    def g(u: float) -> float:
        return expected_goodput(math.exp(u), save_s, mtbi_s, recovery_s)

    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    gc, gd = g(c), g(d)
    for _ in range(200):
        if gc >= gd:
            b, d, gd = d, c, gc
            c = b - _GOLDEN * (b - a)
            gc = g(c)
        else:
            a, c, gc = c, d, gd
            d = a + _GOLDEN * (b - a)
            gd = g(d)
        if b - a < 1e-10:
            break
    return math.exp((a + b) / 2.0)


@dataclass(frozen=True, slots=True)
class Advice:
    """What the advisor measured, what it computed and what it recommends."""

    save_s: float | None
    mtbi_s: float | None
    recovery_s: float | None
    interruptions: int
    step_time_s: float | None
    current_interval_s: float | None  # compute time between checkpoints now
    young_interval_s: float | None
    daly_interval_s: float | None
    optimal_interval_s: float | None
    goodput_current: float | None  # expected G at the current interval
    goodput_optimal: float | None
    recommended_every_steps: int | None
    recommendation: str

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def _fmt_s(s: float) -> str:
    if s >= 5400:
        return f"{s / 3600:.1f} h"
    if s >= 90:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s" if s >= 10 else f"{s:.2g} s"


def advise(
    p: Productivity,
    step_time_s: float | None,
    *,
    mtbi_s: float | None = None,
    save_s: float | None = None,
    recovery_s: float | None = None,
) -> Advice:
    """Advice from a report's productivity figures; the keyword arguments override what was measured."""
    save = save_s if save_s is not None else p.checkpoint_save.mean_s
    m = mtbi_s if mtbi_s is not None else p.mtbi_s
    rec = recovery_s if recovery_s is not None else (p.mttr_s if p.mttr_s is not None else p.checkpoint_restore.mean_s)
    rec = rec or 0.0
    cur = None
    if p.checkpoint_interval_s is not None:
        cur = max(p.checkpoint_interval_s - (save or 0.0), 1e-9)
    step = step_time_s if step_time_s and step_time_s > 0 else None

    def done(msg: str, **kw: Any) -> Advice:
        base: dict[str, Any] = dict(
            save_s=save,
            mtbi_s=m,
            recovery_s=rec,
            interruptions=p.interruptions,
            step_time_s=step,
            current_interval_s=cur,
            young_interval_s=None,
            daly_interval_s=None,
            optimal_interval_s=None,
            goodput_current=None,
            goodput_optimal=None,
            recommended_every_steps=None,
            recommendation=msg,
        )
        base.update(kw)
        return Advice(**base)

    if save is None or save <= 0:
        return done("No checkpoint save was recorded: record checkpoint saves (or pass --save-s) to get advice.")
    if m is None:
        return done(
            "No interruptions recorded yet, so the interruption rate is unknown: "
            "pass --mtbi-s with an expected mean time between interruptions to get advice."
        )
    young, daly = young_interval(save, m), daly_interval(save, m)
    opt = optimal_interval(save, m, rec)
    g_opt = expected_goodput(opt, save, m, rec)
    g_cur = expected_goodput(cur, save, m, rec) if cur is not None else None
    every = max(1, round(opt / step)) if step else None
    kw = dict(
        young_interval_s=young,
        daly_interval_s=daly,
        optimal_interval_s=opt,
        goodput_current=g_cur,
        goodput_optimal=g_opt,
        recommended_every_steps=every,
    )
    target = f"every {every} steps (about {_fmt_s(opt)} of work)" if every else f"after every {_fmt_s(opt)} of work"
    if g_cur is None or cur is None:
        return done(
            f"Checkpoint {target}: expected goodput {100 * g_opt:.1f}% "
            "(no current interval measured: fewer than two saves in one attempt).",
            **kw,
        )
    if p.checkpoint_interval_steps is not None:
        now = f"every {p.checkpoint_interval_steps:.3g} steps"
    else:
        now = f"every {max(1, round(cur / step))} steps" if step else f"every {_fmt_s(cur)}"
    if g_cur >= 0.99 * g_opt:
        return done(
            f"Keep checkpointing {now} (about {_fmt_s(cur)} of work): expected goodput "
            f"{100 * g_cur:.1f}%, within 1% of the optimum {100 * g_opt:.1f}% at {_fmt_s(opt)}.",
            **kw,
        )
    return done(
        f"Checkpoint {target} instead of {now}: expected goodput {100 * g_cur:.1f}% -> {100 * g_opt:.1f}%.", **kw
    )
