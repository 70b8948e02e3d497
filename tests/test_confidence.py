"""BCa bootstrap intervals (metrics/stats/confidence.py) against SciPy's on the same resamples and
against an independent implementation of Efron & Tibshirani's formulas; every jackknife
the reports compute (weights with an image left out, the retrieval metrics' closed form)
against the statistic recomputed without that unit; intervals that always contain their
estimate and say when they deserve less trust."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats

from metrics.retrieval.evaluation import Sample
from metrics.stats.confidence import (
    FEW_UNITS,
    JACKKNIFE_GROUPS,
    WIDENED,
    acceleration,
    bca_ci,
    jackknife_groups,
    leave_one_out,
    resample_counts,
)
from metrics.stats.correlation import correlation, correlation_ci, image_weights


def _scipy_bca(data: tuple[np.ndarray, ...], statistic, replicates: np.ndarray, ci: float,
               **options: object) -> tuple[float, float]:
    """SciPy's BCa interval from OUR replicates (`bootstrap_result`, no resamples of its
    own): its z0, its jackknife over `data`, its acceleration and percentiles."""
    previous = stats.bootstrap(data, statistic, n_resamples=2, confidence_level=ci,
                               method="percentile", rng=0, **options)
    previous.bootstrap_distribution = replicates
    result = stats.bootstrap(data, statistic, n_resamples=0, confidence_level=ci,
                             method="BCa", bootstrap_result=previous, **options)
    return result.confidence_interval.low, result.confidence_interval.high


def _efron_tibshirani(replicates: list[float], estimate: float, jackknife: list[float],
                      ci: float) -> tuple[float, float]:
    """Efron & Tibshirani (1993) section 14.3 in plain Python, written from the formulas:
    z0 = Φ⁻¹(#{θ* < θ̂} / B), a = Σ(θ̄ - θ_i)³ / (6 (Σ(θ̄ - θ_i)²)^{3/2}), the limits at
    Φ(z0 + (z0 + z_alpha) / (1 - a (z0 + z_alpha))) of the sorted replicates (interpolated
    linearly between order statistics, as numpy.percentile does)."""
    normal = NormalDist()
    z0 = normal.inv_cdf(sum(1 for value in replicates if value < estimate) / len(replicates))
    mean = sum(jackknife) / len(jackknife)
    cubes = sum((mean - value) ** 3 for value in jackknife)
    squares = sum((mean - value) ** 2 for value in jackknife)
    a = cubes / (6 * squares**1.5)
    ordered = sorted(replicates)
    limits = []
    for alpha in ((1 - ci) / 2, (1 + ci) / 2):
        z_alpha = normal.inv_cdf(alpha)
        level = normal.cdf(z0 + (z0 + z_alpha) / (1 - a * (z0 + z_alpha)))
        position = level * (len(ordered) - 1)
        below = math.floor(position)
        above = min(below + 1, len(ordered) - 1)
        limits.append(ordered[below] + (position - below) * (ordered[above] - ordered[below]))
    return limits[0], limits[1]


def _drawn(n: int, bootstrap: int, seed: int) -> np.ndarray:
    """(bootstrap x n) resampled indices."""
    return np.random.default_rng(seed).integers(0, n, (bootstrap, n))


def _skewed_samples():
    rng = np.random.default_rng(7)
    for n in (12, 20, 40):  # no resample repeats the sample (ties: see below)
        yield rng.standard_exponential(n) ** 2
        yield rng.lognormal(0, 1.2, n)


def test_bca_of_a_mean_equals_scipy_on_the_same_resamples():
    worst = 0.0
    for sample in _skewed_samples():
        drawn = _drawn(len(sample), 2000, len(sample))
        replicates = sample[drawn].mean(axis=1)
        jackknife = np.array([np.delete(sample, i).mean() for i in range(len(sample))])
        for ci in (0.9, 0.95):
            ours = bca_ci(replicates, sample.mean(), jackknife, ci)
            theirs = _scipy_bca((sample,), np.mean, replicates, ci)
            worst = max(worst, abs(ours.low - theirs[0]), abs(ours.high - theirs[1]))
            assert ours.low <= sample.mean() <= ours.high
    assert worst < 1e-12


def test_bca_of_a_correlation_equals_scipy_on_the_same_resamples():
    rng = np.random.default_rng(3)
    worst = 0.0
    for n in (12, 30, 80):
        x = rng.standard_exponential(n)
        y = x**2 + rng.normal(0, 1, n)
        drawn = _drawn(n, 1500, n)
        replicates = np.array([correlation(x[rows], y[rows], "pearson") for rows in drawn])
        jackknife = np.array([correlation(np.delete(x, i), np.delete(y, i), "pearson")
                              for i in range(n)])
        ours = bca_ci(replicates, correlation(x, y, "pearson"), jackknife, 0.9)
        theirs = _scipy_bca((x, y), lambda a, b: stats.pearsonr(a, b).statistic, replicates,
                            0.9, paired=True, vectorized=False)
        worst = max(worst, abs(ours.low - theirs[0]), abs(ours.high - theirs[1]))
    assert worst < 1e-12


def test_bca_equals_an_independent_implementation_of_the_formulas():
    """On continuous statistics (no replicate ties the estimate), our BCa against
    `_efron_tibshirani`, which shares no code with ours."""
    rng = np.random.default_rng(11)
    worst = 0.0
    for trial in range(12):
        n = int(rng.integers(12, 60))
        x = rng.lognormal(0, 1, n)
        y = x + rng.standard_exponential(n)
        statistic = [lambda r, x=x: x[r].mean(),
                     lambda r, x=x, y=y: x[r].sum() / y[r].sum(),
                     lambda r, x=x, y=y: correlation(x[r], y[r], "spearman")][trial % 3]
        drawn = _drawn(n, 1000, trial)
        replicates = [statistic(rows) for rows in drawn]
        everything = np.arange(n)
        jackknife = [statistic(np.delete(everything, i)) for i in range(n)]
        estimate = statistic(everything)
        assert estimate not in replicates
        ci = (0.8, 0.9, 0.95)[trial % 3]
        ours = bca_ci(np.array(replicates), estimate, np.array(jackknife), ci)
        low, high = _efron_tibshirani(replicates, estimate, jackknife, ci)
        worst = max(worst, abs(ours.low - low), abs(ours.high - high))
    assert worst < 1e-12


@pytest.mark.parametrize("method", ["pearson", "spearman", "kendall-b"])
def test_image_resampled_correlation_bca_equals_scipy_leaving_images_out(method):
    """The reports' jackknife is rows of weights with one image's captions at 0: it must
    equal SciPy's jackknife over image ids with the statistic recomputed on the captions of
    the images kept (several captions per image, ties in the human scores)."""
    rng = np.random.default_rng(5)
    images = np.repeat(np.arange(25), rng.integers(1, 5, 25))
    x = np.round(rng.standard_exponential(len(images)), 1)
    y = rng.integers(1, 6, len(images)).astype(float) + (x > 1)
    weights = image_weights(images, 400, 2, jackknife=True)
    ours = correlation_ci(x, y, method, weights, 0.9, kendall=True, bootstrap=400)
    replicates = np.array([correlation(np.repeat(x, row), np.repeat(y, row), method)
                           for row in weights[:400].astype(int)])

    def statistic(chosen: np.ndarray) -> float:
        rows = np.concatenate([np.flatnonzero(images == image) for image in chosen])
        return correlation(x[rows], y[rows], method)

    theirs = _scipy_bca((np.unique(images),), statistic, replicates, 0.9, vectorized=False)
    assert ours.low == pytest.approx(theirs[0], abs=1e-12)
    assert ours.high == pytest.approx(theirs[1], abs=1e-12)


def test_retrieval_jackknife_equals_the_value_without_each_query():
    rng = np.random.default_rng(2)
    folds = [rng.random(7), rng.random(5), rng.random(9)]
    for denominators in (None, [rng.random(7) + 0.5, rng.random(5) + 0.5,
                                rng.random(9) + 0.5]):
        sample = Sample(folds, denominators)
        for fold, values in enumerate(sample.jackknife()):
            expected = [Sample([np.delete(f, i) if k == fold else f
                                for k, f in enumerate(folds)],
                               None if denominators is None else [
                                   np.delete(d, i) if k == fold else d
                                   for k, d in enumerate(denominators)]).value()
                        for i in range(len(folds[fold]))]
            np.testing.assert_allclose(values, expected, rtol=1e-13)


def test_the_estimate_is_always_inside_and_a_widened_interval_says_so():
    replicates = np.linspace(0.70, 1.0, 200)  # every resample above the estimate
    interval = bca_ci(replicates, 0.698, np.linspace(0.6, 0.8, 12), 0.9)
    assert interval.low == 0.698 and interval.high <= 1.0
    assert interval.warning == WIDENED
    # a bias beyond the interval: 97% of the replicates below the estimate
    replicates = np.concatenate([np.linspace(0.0, 0.5, 970), np.linspace(0.6, 0.7, 30)])
    interval = bca_ci(replicates, 0.55, np.linspace(0.4, 0.6, 30), 0.9)
    assert interval.low <= 0.55 <= interval.high and interval.warning == WIDENED
    # an ordinary case: no warning, no widening
    rng = np.random.default_rng(0)
    interval = bca_ci(rng.normal(0.5, 0.1, 1000), 0.5, rng.normal(0.5, 0.01, 40), 0.9)
    assert interval.low < 0.5 < interval.high and interval.warning is None


def test_few_units_carry_a_warning():
    replicates = np.random.default_rng(0).normal(size=500)
    for units in (1, 2, FEW_UNITS - 1, FEW_UNITS):
        jackknife = np.linspace(-0.1, 0.1, units) if units > 1 else np.empty(0)
        warning = bca_ci(replicates, 0.0, jackknife, 0.9, unit="queries").warning
        if units < FEW_UNITS:
            noun = "query" if units == 1 else "queries"
            assert warning is not None and f"only {units} {noun} resampled" in warning
        else:
            assert warning is None


def test_ties_with_the_estimate_count_half_and_degenerate_intervals_stay_put():
    assert bca_ci(np.full(100, 1.0), 1.0, np.ones(12), 0.9)[:2] == (1.0, 1.0)
    # float noise of the same value computed along another path is a tie
    assert bca_ci(np.full(100, 0.1 + 0.2), 0.3, np.full(12, 0.3), 0.9)[:2] == pytest.approx(
        (0.3, 0.3))
    assert acceleration(np.full(5, 2.0)) == 0.0


def test_a_large_jackknife_is_grouped():
    assert leave_one_out(5).shape == (5, 5) and (leave_one_out(5).sum(axis=1) == 4).all()
    assert leave_one_out(1).shape == (0, 1)
    big = leave_one_out(2 * JACKKNIFE_GROUPS + 1)
    assert big.shape == (JACKKNIFE_GROUPS, 2 * JACKKNIFE_GROUPS + 1)
    groups = jackknife_groups(2 * JACKKNIFE_GROUPS + 1)
    assert (big == (groups[None, :] != np.arange(JACKKNIFE_GROUPS)[:, None])).all()


# --- every printed CI of the sample project -------------------------------------------

CI_KEYS = (("value", "ci_low", "ci_high"), ("r", "ci_low", "ci_high"),
           ("accuracy", "ci_low", "ci_high"), ("difference", "ci_low", "ci_high"),
           ("total", "total_ci_low", "total_ci_high"))


def _intervals(data: object) -> list[tuple[float, float, float, object]]:
    """Every (value, low, high, warning) in a JSON output, wherever it is nested."""
    found = []
    if isinstance(data, dict):
        for value, low, high in CI_KEYS:
            if all(data.get(key) is not None for key in (value, low, high)):
                warning = data.get("total_ci_warning" if value == "total" else "ci_warning")
                found.append((data[value], data[low], data[high], warning))
        for item in data.values():
            found += _intervals(item)
    elif isinstance(data, list):
        for item in data:
            found += _intervals(item)
    return found


def _printed_intervals(text: str) -> list[tuple[str, str, str]]:
    """(value, low, high) as printed in the terminal's tables (tabulate's `simple`
    layout, each CI on the line under its value, in the same column)."""
    import re

    found = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if not re.fullmatch(r"-+( +-+)*", line):
            continue
        spans = [m.span() for m in re.finditer(r"-+", line)]
        spans[-1] = (spans[-1][0], 10**6)
        for above, below in zip(lines[index + 1:], lines[index + 2:], strict=False):
            if not below.strip() or re.fullmatch(r"-+( +-+)*", below):
                break
            for start, end in spans:
                value = re.match(r"(-?\d+\.\d+)", above[start:end].strip())
                bounds = re.match(r"\[(-?\d+\.\d+), (-?\d+\.\d+)\]", below[start:end].strip())
                if value and bounds:
                    found.append((value.group(1), *bounds.groups()))
    return found


def _sample_project(tmp_path, images: tuple[str, ...] | None = None):
    """The sample project (or its captions, ratings and judgments of `images` only) with
    BLEU, ROUGE-L and CIDEr-D, BISON and the sample judgment set; a function running
    `thumb` on it."""
    from typer.testing import CliRunner

    from tests.conftest import SAMPLE_CSV
    from thumb_tui.cli import app

    sample = SAMPLE_CSV.parent
    files = {name: sample / name for name in ("captions.csv", "example_ratings.csv",
                                              "judgments.csv")}
    if images is not None:  # the same files, cut down to these images
        for name, column in (("captions.csv", 1), ("example_ratings.csv", 0),
                             ("judgments.csv", 0)):
            rows = (sample / name).read_text(encoding="utf-8").splitlines()
            kept = [rows[0], *(r for r in rows[1:] if r.split(",")[column] in images)]
            (tmp_path / name).write_text("\n".join(kept) + "\n", encoding="utf-8")
            files[name] = tmp_path / name
        if (tmp_path / "images").exists() is False:
            (tmp_path / "images").symlink_to(sample / "images")
    runner = CliRunner()

    def thumb(*args: str) -> str:
        result = runner.invoke(app, ["--db", str(tmp_path / "ci.db"), *args])
        assert result.exit_code == 0, (args, result.output)
        return result.output

    tokens = ["--tokenizer", "ptb-python"]
    metrics = ["--metric", "bleu", "--metric", "rouge-l", "--metric", "cider-d"]
    thumb("import", str(files["captions.csv"]), "--allow-outside-images")
    thumb("import", str(files["example_ratings.csv"]), "--allow-outside-images")
    thumb("metrics", "compute", *metrics, *tokens)
    thumb("judgments", "import", str(files["judgments.csv"]), "--name", "sample",
          "--scale", "1-4", "--references", str(sample / "references.csv"))
    thumb("metrics", "compute", "--judgments", "sample", *metrics, *tokens)
    return thumb


@pytest.mark.slow
def test_no_printed_ci_of_the_sample_project_excludes_its_estimate(tmp_path):
    import json

    from tests.conftest import SAMPLE_CSV

    thumb = _sample_project(tmp_path)
    thumb("bison", "import", str(SAMPLE_CSV.parent / "bison.jsonl"))
    thumb("bison", "evaluate", "--scorer", "bleu")
    thumb("report", "--format", "json", "--out", str(tmp_path / "report"))
    outputs = {
        "agreement": json.loads(thumb("agreement", "--format", "json")),
        "report": json.loads((tmp_path / "report" / "report.json").read_text()),
        "judgments": json.loads(thumb("judgments", "report", "sample", "--format", "json")),
        "bison": json.loads(thumb("bison", "report", "--format", "json")),
    }
    few_items = "only 8 items resampled (fewer than 10): the interval is unreliable"
    warned = {"agreement": {None}, "judgments": {None}, "report": {None, few_items},
              "bison": {few_items}}  # 15 images; the sample's BISON has 8 items
    for name, output in outputs.items():
        intervals = _intervals(output)
        assert len(intervals) > (0 if name == "bison" else 10), name
        outside = [i for i in intervals if not i[1] <= i[0] <= i[2]]
        assert outside == [], name
        assert {warning for *_, warning in intervals} == warned[name], name
    assert outputs["report"]["header"]["ci_method"] == "bca"
    assert outputs["judgments"]["header"]["ci_method"] == "bca"
    for text in (thumb("agreement"), thumb("judgments", "report", "sample")):
        printed = _printed_intervals(text)
        assert len(printed) > 10 and "BCa" in text
        assert [p for p in printed if not float(p[1]) <= float(p[0]) <= float(p[2])] == []


@pytest.mark.slow
def test_two_images_the_issue_s_failure_and_its_fix(tmp_path):
    """Images img12 and img13 of the sample: the percentile intervals printed
    `alpha_ordinal 0.992 [0.96, 0.99]` (`thumb agreement`) and `spearman 0.448 [0.45, 0.57]`
    (`thumb judgments report`, bleu), an estimate outside its printed interval over 2
    images with no word of warning."""
    import json

    thumb = _sample_project(tmp_path, ("img12", "img13"))
    agreement = json.loads(thumb("agreement", "--format", "json"))
    judgments = json.loads(thumb("judgments", "report", "sample", "--format", "json"))
    for output in (agreement, judgments):
        intervals = _intervals(output)
        assert intervals and [i for i in intervals if not i[1] <= i[0] <= i[2]] == []
        assert all("only 2 images resampled" in warning for *_, warning in intervals)
    for text in (thumb("agreement"), thumb("agreement", "--format", "md"),
                 thumb("judgments", "report", "sample"),
                 thumb("judgments", "report", "sample", "--format", "md")):
        assert "only 2 images resampled (fewer than 10): the interval is unreliable" in text
    for text in (thumb("agreement"), thumb("judgments", "report", "sample")):
        printed = _printed_intervals(text)
        assert printed
        assert [p for p in printed if not float(p[1]) <= float(p[0]) <= float(p[2])] == []


def test_resample_counts_are_index_draws_whatever_the_chunk():
    """Chunks of 7 replicates or of 1,000 give the same counts: each replicate counts 53
    indices that numpy's `choice` draws with replacement, one call per replicate."""
    whole = list(resample_counts(53, 1000, np.random.default_rng(7), chunk=1000))
    pieces = list(resample_counts(53, 1000, np.random.default_rng(7), chunk=7))
    assert [len(p) for p in whole] == [1000]
    assert [len(p) for p in pieces] == [7] * 142 + [6]
    assert np.array_equal(np.vstack(pieces), whole[0])
    rng = np.random.default_rng(7)
    loop = [np.bincount(rng.choice(53, 53), minlength=53) for _ in range(1000)]
    assert np.array_equal(whole[0], loop)
    # multinomial(53, 1/53): every unit drawn once on average, variance 1 - 1/53
    assert whole[0].mean() == 1.0
    assert whole[0].var() == pytest.approx(1 - 1 / 53, rel=0.05)


@pytest.mark.parametrize("units", [1, 3, 1500, 70_000])
def test_resample_counts_draw_one_call_per_replicate_numbers_in_any_grouping(units: int):
    """Counts drawn a group of replicates per `rng.integers` call (small lists) or one
    replicate per call (large ones) are those of one call per replicate."""
    replicates = 9 if units > 10_000 else 400
    rng = np.random.default_rng(11)
    loop = [np.bincount(rng.integers(0, units, size=units), minlength=units)
            for _ in range(replicates)]
    for chunk in (replicates, 4):
        counts = np.vstack(list(resample_counts(units, replicates,
                                                np.random.default_rng(11), chunk=chunk)))
        assert np.array_equal(counts, loop)
