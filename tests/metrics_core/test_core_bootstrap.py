"""Bootstrap: batch replicates equal per-resample loops, scipy agreement, pairing and macro units."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from auditlang.metrics import (
    CI,
    accuracy,
    aurc,
    auroc,
    bootstrap_ci,
    bootstrap_many,
    brier,
    ece,
    ks_ce,
    macro_bootstrap,
    mce,
    nll,
    paired_bootstrap_diff,
    resample_indices,
    selective_accuracy,
)

CASES = [
    (brier, {}),
    (nll, {}),
    (ece, {}),
    (ece, {"bins": 15, "closed": "right"}),
    (ece, {"binning": "equal_mass"}),
    (ece, {"binning": "equal_mass", "bins": 7, "closed": "right"}),
    (mce, {}),
    (mce, {"binning": "equal_mass"}),
    (ks_ce, {}),
    (auroc, {}),
    (aurc, {}),
    (selective_accuracy, {"coverage": 0.8}),
    (selective_accuracy, {"coverage": 0.33}),
]


@pytest.mark.parametrize("ties", [None, 1])
@pytest.mark.parametrize("fn,kw", CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_batch_replicates_equal_the_per_resample_loop(fn, kw, ties, synth):
    c, y = synth(120, 5, ties=ties)
    fast = bootstrap_ci(fn, c, y, B=40, **kw)
    slow = bootstrap_ci(lambda a, b: fn(a, b, **kw), c, y, B=40)  # a lambda has no batch form
    assert (fast.point, fast.low, fast.high, fast.boot_mean) == pytest.approx(
        (slow.point, slow.low, slow.high, slow.boot_mean), abs=1e-12)


@pytest.mark.parametrize("fn,kw", [(ece, {}), (ece, {"binning": "equal_mass"}), (auroc, {}), (aurc, {}),
                                   (selective_accuracy, {"coverage": 0.5}), (ks_ce, {}), (brier, {})],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_missing_drop_resamples_rows_then_drops_inside_each_resample(fn, kw, synth):
    c, y = synth(80, 9, ties=2)
    c[::7] = np.nan
    fast = bootstrap_ci(fn, c, y, B=40, missing="drop", **kw)
    slow = bootstrap_ci(lambda a, b: fn(a, b, missing="drop", **kw), c, y, B=40)
    assert (fast.low, fast.high, fast.boot_mean) == pytest.approx((slow.low, slow.high, slow.boot_mean), abs=1e-12)
    assert fast.point == pytest.approx(fn(c[~np.isnan(c)], y[~np.isnan(c)], **kw))


def test_accuracy_takes_one_array_and_agrees_with_scipy(data500):
    _, y = data500
    ours = bootstrap_ci(accuracy, y, B=2000)
    ref = stats.bootstrap((y,), np.mean, n_resamples=2000, method="percentile", random_state=1)
    assert ours.point == y.mean()
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.006)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.006)


def test_ece_interval_agrees_with_scipy_percentile_bootstrap(data500):
    c, y = data500
    ours = bootstrap_ci("ece", c, y, B=2000)
    ref = stats.bootstrap((c, y), lambda a, b: ece(a, b), paired=True, vectorized=False, n_resamples=2000,
                          method="percentile", random_state=3)
    assert ours.low == pytest.approx(ref.confidence_interval.low, abs=0.006)
    assert ours.high == pytest.approx(ref.confidence_interval.high, abs=0.006)


def test_seed_determinism_and_defaults(data500):
    c, y = data500
    a, b = bootstrap_ci(brier, c, y), bootstrap_ci(brier, c, y)
    assert a == b and a.B == 1000 and a.seed == 42 and a.level == 0.95
    assert bootstrap_ci(brier, c, y, seed=7) != a
    idx = resample_indices(c.size)
    assert idx.shape == (1000, 500)
    reps = np.array([brier(c[r], y[r]) for r in idx])
    assert (a.low, a.high) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])), abs=1e-12)


def test_paired_difference_uses_the_same_indices(synth):
    c, y = synth(200, 11)
    c2 = np.clip(c + 0.1, 0, 1)
    same = paired_bootstrap_diff(ece, (c, y), (c, y), B=100)
    assert (same.point, same.low, same.high) == (0.0, 0.0, 0.0)
    res = paired_bootstrap_diff(ece, (c2, y), (c, y), B=100, seed=3)
    idx = resample_indices(200, 100, 3)
    reps = np.array([ece(c2[r], y[r]) - ece(c[r], y[r]) for r in idx])
    assert (res.low, res.high) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])), abs=1e-12)
    # 000 App. E.2 paired drop: acc(surface) - acc(format_change) on the same items
    y2 = y.copy()
    y2[:60] = 0
    drop = paired_bootstrap_diff(accuracy, (y,), (y2,), B=200)
    assert drop.point == pytest.approx(y.mean() - y2.mean()) and drop.low > 0
    with pytest.raises(ValueError, match="same items"):
        paired_bootstrap_diff(ece, (c, y), (c[:10], y[:10]))


def test_macro_bootstrap_resamples_within_settings_then_averages(synth):
    settings = [synth(n, s) for s, n in ((1, 50), (2, 80), (3, 65))]
    res = macro_bootstrap(brier, settings, B=60, seed=5)
    rng = np.random.default_rng(5)
    per = []
    for c, y in settings:
        idx = rng.integers(0, c.size, size=(60, c.size))
        per.append([brier(c[r], y[r]) for r in idx])
    reps = np.mean(per, axis=0)
    assert res.point == pytest.approx(np.mean([brier(c, y) for c, y in settings]))
    assert res.boot_mean == pytest.approx(reps.mean())
    assert (res.low, res.high) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])), abs=1e-12)
    # a per-setting paired gap (001's g = ECE(verbal) - ECE(token)) is a callable of the setting's arrays
    gap = macro_bootstrap(lambda cv, ct, yy: ece(cv, yy) - ece(ct, yy),
                          [(np.clip(c + 0.05, 0, 1), c, y) for c, y in settings], B=50)
    assert np.isfinite(gap.low) and gap.low <= gap.high


def test_bootstrap_many_equals_bootstrap_ci(synth):
    cells = {("m1", "d1"): synth(90, 1), ("m2", "d1"): synth(90, 2), "small": synth(30, 3, ties=1)}
    metrics = {"acc": "accuracy", "ece": "ece", "em": ("ece", {"binning": "equal_mass"}),
               "sel": (selective_accuracy, {"coverage": 0.5}), "auroc": auroc}
    out = bootstrap_many(cells, metrics, B=50, seed=4)
    assert set(out) == {(k, m) for k in cells for m in metrics}
    c, y = cells["small"]
    assert out[("small", "acc")] == bootstrap_ci(accuracy, y, B=50, seed=4)
    assert out[("small", "em")] == bootstrap_ci(ece, c, y, B=50, seed=4, binning="equal_mass")
    assert out[("small", "sel")] == bootstrap_ci(selective_accuracy, c, y, B=50, seed=4, coverage=0.5)


def test_undefined_replicates_are_counted_and_excluded():
    c = np.array([0.9, 0.8, 0.7, 0.6, 0.2])
    y = np.array([1, 1, 1, 1, 0.0])
    res = bootstrap_ci(auroc, c, y, B=200)
    assert res.n_nan > 0 and res.point == 1.0 and res.low <= res.high
    allnan = bootstrap_ci(auroc, c[:4], y[:4], B=10)
    assert allnan.n_nan == 10 and np.isnan(allnan.low) and np.isnan(allnan.point)
    # generic path: a resample whose confidences are all missing raises inside the metric -> NaN
    res = bootstrap_ci(lambda a, b: ece(a, b, missing="drop"), np.array([np.nan, 0.5]), np.array([1, 0.0]), B=50)
    assert 0 < res.n_nan < 50


def test_ci_excludes():
    assert CI(0.1, 0.05, 0.2, 10, 1).excludes(0.0)
    assert not CI(0.1, -0.05, 0.2, 10, 1).excludes(0.0)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"B": 0}, "B must be a positive integer"), ({"level": 1.0}, "level must be in"),
     ({"seed": -1}, "seed must be a non-negative integer")],
)
def test_bootstrap_argument_validation(kwargs, message, data500):
    c, y = data500
    with pytest.raises(ValueError, match=message):
        bootstrap_ci(brier, c, y, **kwargs)


def test_bootstrap_input_validation(data500):
    c, y = data500
    with pytest.raises(ValueError, match="unknown metric 'ecee'"):
        bootstrap_ci("ecee", c, y)
    with pytest.raises(ValueError, match="mismatched lengths"):
        bootstrap_ci(brier, c, y[:5])
    with pytest.raises(ValueError, match="ece: bins must be >= 1"):
        bootstrap_ci(ece, c, y, bins=0)
    with pytest.raises(ValueError, match="no settings"):
        macro_bootstrap(brier, [])
