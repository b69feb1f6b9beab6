"""Style sensitivity (source §"Laplace logit"): how much a model's pass rate moves with the
difficulty of a configuration (a communication style, or a phase) compared with every model.

For model m and configuration c with k passes out of n scored triggers,
``l[m, c] = log((k + 0.5) / (n − k + 0.5))`` (Laplace-smoothed, finite at 0 and 100 %). The
configuration's difficulty is the mean over models ``L[c] = mean_m l[m, c]`` (over the models
that have triggers in c). Per model, OLS ``l[m, c] = a_m + b_m · L[c] + e`` over the
configurations where the model has triggers: slope b_m with its standard error and CI,
intercept a_m, R². b_m ≈ 1: the model tracks style difficulty like the field; b_m < 1: a
style-uniform policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import statsmodels.api as sm

from stats.compute.resampling import CONFIDENCE


def laplace_logit(k: np.ndarray, n: np.ndarray) -> np.ndarray:
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    return np.log((k + 0.5) / (n - k + 0.5))


@dataclass(frozen=True)
class OlsFit:
    n: int
    slope: float
    slope_se: float
    slope_ci: tuple[float, float]
    slope_p: float
    intercept: float
    r_squared: float


def ols_fit(x: np.ndarray, y: np.ndarray, *, level: float = CONFIDENCE) -> OlsFit:
    """OLS of y on x with an intercept (statsmodels). With two points the line is exact and
    has no standard error (NaN); with fewer, or no spread in x, everything is NaN."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    nan = float("nan")
    if x.size < 2 or np.ptp(x) == 0:
        return OlsFit(int(x.size), nan, nan, (nan, nan), nan, nan, nan)
    fit = sm.OLS(y, sm.add_constant(x, has_constant="add")).fit()
    if x.size < 3:
        slope = float(fit.params[1])
        return OlsFit(
            2, slope, nan, (nan, nan), nan, float(fit.params[0]), 1.0 if np.ptp(y) else nan
        )
    low, high = fit.conf_int(alpha=1 - level)[1]
    return OlsFit(
        n=int(x.size),
        slope=float(fit.params[1]),
        slope_se=float(fit.bse[1]),
        slope_ci=(float(low), float(high)),
        slope_p=float(fit.pvalues[1]),
        intercept=float(fit.params[0]),
        r_squared=float(fit.rsquared) if np.ptp(y) > 0 else nan,  # nothing to explain
    )


@dataclass(frozen=True)
class StyleSensitivity:
    models: list[str]
    configurations: list
    logits: np.ndarray  # models × configurations, NaN where a model has no trigger
    difficulty: np.ndarray  # mean logit per configuration
    fits: list[OlsFit]  # one per model


def style_sensitivity(
    *,
    models: np.ndarray,
    configurations: np.ndarray,
    passed: np.ndarray,
    level: float = CONFIDENCE,
) -> StyleSensitivity:
    """Inputs aligned per *scored* reply: the model, its configuration, whether it passed."""
    models = np.asarray(models)
    configurations = np.asarray(configurations)
    passed = np.asarray(passed, dtype=bool)
    model_names, model_index = np.unique(models, return_inverse=True)
    config_names, config_index = np.unique(configurations, return_inverse=True)
    shape = (model_names.size, config_names.size)
    cell = np.ravel_multi_index((model_index, config_index), shape)
    n = np.bincount(cell, minlength=np.prod(shape)).reshape(shape)
    k = np.bincount(cell, weights=passed, minlength=np.prod(shape)).reshape(shape)
    logits = np.where(n > 0, laplace_logit(k, np.maximum(n, 1)), np.nan)
    with np.errstate(invalid="ignore"):
        difficulty = np.nanmean(logits, axis=0) if shape[0] else np.zeros(shape[1])
    fits = [ols_fit(difficulty, logits[m], level=level) for m in range(shape[0])]
    return StyleSensitivity(
        models=[str(m) for m in model_names],
        configurations=config_names.tolist(),
        logits=logits,
        difficulty=difficulty,
        fits=fits,
    )
