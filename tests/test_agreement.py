"""Agreement statistics against textbook examples, scikit-learn and krippendorff, and their
bootstrap as sums over units against recomputing every resample with those packages."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import metrics.stats.agreement
from metrics.stats.agreement import (
    UndefinedStatistic,
    alpha_from_matrix,
    alpha_sums,
    cohen_kappa,
    kappa_from_pairs,
    kappa_sums,
    krippendorff_alpha,
    rate_sums,
    resampled,
)
from metrics.stats.confidence import jackknife_groups

NAN = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers,
# 12 units, missing values; the paper gives nominal .743, ordinal .815, interval .849
KRIPPENDORFF_2011 = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
                              [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
                              [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
                              [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN]])


def long_format(a, b) -> pd.DataFrame:
    rows = [{"item": i, "rater": "A", "score": x} for i, x in enumerate(a)]
    rows += [{"item": i, "rater": "B", "score": y} for i, y in enumerate(b)]
    return pd.DataFrame(rows)


def test_kappa_textbook_example():
    # 50 items: both yes 20, A yes/B no 5, A no/B yes 10, both no 15 -> po .7, pe .5, kappa .4
    a = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert cohen_kappa(long_format(a, b), "item", "rater", "score") == pytest.approx(0.4)


def test_alpha_interval_hand_computed():
    # units (1,2), (2,2), (3,3): Do = 2/6, De = 34/30 -> alpha = 12/17
    data = long_format([1, 2, 3], [2, 2, 3])
    assert krippendorff_alpha(data, "item", "rater", "score", "interval") == pytest.approx(
        12 / 17)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_matches_scikit_learn_on_random_data(seed, weights):
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(seed)
    a = rng.integers(1, 6, 80)
    b = np.clip(a + rng.integers(-1, 2, 80), 1, 5)
    expected = cohen_kappa_score(a, b, weights=weights, labels=[1, 2, 3, 4, 5])
    ours = kappa_from_pairs(a, b, weights, categories=[1, 2, 3, 4, 5])
    assert ours == pytest.approx(expected)
    assert cohen_kappa(long_format(a, b), "item", "rater", "score", weights) == pytest.approx(
        cohen_kappa_score(a, b, weights=weights))


@pytest.mark.parametrize("level", ["ordinal", "interval"])
def test_alpha_matches_krippendorff_with_missing_values(level):
    import krippendorff

    rng = np.random.default_rng(7)
    matrix = rng.integers(1, 6, (3, 40)).astype(float)
    matrix[rng.random(matrix.shape) < 0.2] = np.nan
    rows = [{"item": j, "rater": f"r{i}", "score": matrix[i, j]}
            for i in range(3) for j in range(40) if not np.isnan(matrix[i, j])]
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
    assert krippendorff_alpha(pd.DataFrame(rows), "item", "rater", "score", level) == (
        pytest.approx(expected))


@pytest.mark.parametrize(("level", "published"),
                         [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_alpha_is_the_published_value_of_krippendorffs_example(level, published):
    assert round(alpha_from_matrix(KRIPPENDORFF_2011, level), 3) == published


def _random_matrix(rng: np.random.Generator, continuous: bool) -> np.ndarray:
    raters, units = int(rng.integers(2, 5)), int(rng.integers(2, 40))
    matrix = (rng.normal(50, 20, (raters, units)).round(2) if continuous
              else rng.integers(1, 6, (raters, units)).astype(float))
    matrix[rng.random(matrix.shape) < 0.3] = NAN
    return matrix


@pytest.mark.parametrize("seed", range(40))
def test_alpha_matches_krippendorff_to_rounding_on_random_data(seed):
    import krippendorff

    rng = np.random.default_rng(seed)
    continuous = seed % 4 == 0  # a continuous scale: interval only
    matrix = _random_matrix(rng, continuous)
    for level in ("interval",) if continuous else ("nominal", "ordinal", "interval"):
        try:
            ours = alpha_from_matrix(matrix, level)
        except UndefinedStatistic:
            continue
        expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
        assert ours == pytest.approx(expected, rel=1e-12, abs=1e-12)


def _alpha_or_nan(matrix: np.ndarray, level: str) -> float:
    import krippendorff

    if not ((~np.isnan(matrix)).sum(axis=0) >= 2).any():
        return NAN
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level))


@pytest.mark.parametrize("chunk_bytes", [8, 1000, 2**25])
def test_resampled_statistics_equal_recomputing_each_resample(monkeypatch, chunk_bytes):
    """Each replicate and jackknife value of the sums equals the statistic recomputed by
    krippendorff and scikit-learn on the resampled units themselves: groups of units
    drawn by `bootstrap` calls of rng.integers, and each jackknife group left out."""
    from sklearn.metrics import cohen_kappa_score

    monkeypatch.setattr(metrics.stats.agreement, "CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(3)
    matrix = rng.integers(1, 6, (2, 60)).astype(float)
    matrix[1] = np.where(rng.random(60) < 0.6, matrix[0], matrix[1])
    group_of_unit = rng.integers(0, 12, 60)  # 12 images of 60 captions
    statistics = [alpha_sums(matrix, "ordinal"), alpha_sums(matrix, "interval"),
                  kappa_sums(matrix[0], matrix[1], "linear", [1, 2, 3, 4, 5]),
                  rate_sums(matrix[0] == matrix[1])]
    replicates, jackknife = resampled(statistics, group_of_unit, 12, 30,
                                      np.random.default_rng(9))

    def direct(units: np.ndarray) -> list[float]:
        a, b = matrix[:, units]
        return [_alpha_or_nan(matrix[:, units], "ordinal"),
                _alpha_or_nan(matrix[:, units], "interval"),
                cohen_kappa_score(a, b, weights="linear", labels=[1, 2, 3, 4, 5]),
                float(np.mean(a == b))]

    draws = np.random.default_rng(9)
    for replicate in range(30):
        chosen = draws.integers(0, 12, 12)
        units = np.concatenate([np.flatnonzero(group_of_unit == g) for g in chosen])
        expected = direct(units)
        for values, value in zip(replicates, expected, strict=True):
            assert values[replicate] == pytest.approx(value, rel=1e-12, abs=1e-12,
                                                      nan_ok=True)
    jackknife_group = jackknife_groups(12)
    for left_out in range(jackknife_group.max() + 1):
        units = np.flatnonzero(jackknife_group[group_of_unit] != left_out)
        for values, value in zip(jackknife, direct(units), strict=True):
            assert values[left_out] == pytest.approx(value, rel=1e-12, abs=1e-12)


def test_undefined_values_say_why():
    with pytest.raises(UndefinedStatistic, match="one category only"):
        kappa_from_pairs(np.array([3, 3, 3]), np.array([3, 3, 3]))
    with pytest.raises(UndefinedStatistic, match="fewer than 2 items"):
        kappa_from_pairs(np.array([3]), np.array([4]))
    with pytest.raises(UndefinedStatistic, match="one value only"):
        krippendorff_alpha(long_format([2, 2], [2, 2]), "item", "rater", "score")


def test_precise_errors_on_bad_input():
    with pytest.raises(ValueError, match="column 'grade' not in data"):
        cohen_kappa(long_format([1, 2], [1, 2]), "item", "rater", "grade")
    three = pd.concat([long_format([1, 2], [1, 2]),
                       pd.DataFrame([{"item": 0, "rater": "C", "score": 1}])])
    with pytest.raises(ValueError, match="exactly two raters; 0 has 3"):
        cohen_kappa(three, "item", "rater", "score")
    with pytest.raises(ValueError, match="weights must be one of"):
        kappa_from_pairs(np.array([1, 2]), np.array([1, 2]), "cubic")
    with pytest.raises(ValueError, match="level must be one of"):
        alpha_from_matrix(np.array([[1.0, 2.0], [1.0, 2.0]]), "ratio")
    continuous = np.random.default_rng(0).normal(size=(2, 3000))
    with pytest.raises(ValueError, match="6000 distinct values of 3000 units: too many "):
        alpha_from_matrix(continuous, "ordinal")
    assert np.isfinite(alpha_from_matrix(continuous, "interval"))


def test_bootstrap_is_reproducible_with_a_seed(tmp_path):
    from reports.agreement import agreement_report
    from storage.rating.project_queues import assign_double
    from storage.rating.rating_sessions import AnnotationSession
    from tests.app_helpers import sample_engine
    from tests.test_workflow import rate_everything

    engine = sample_engine(tmp_path)
    assign_double(engine, 0.5, seed=2, actor="lead")
    rate_everything(AnnotationSession(engine, "alice"), 1)
    rate_everything(AnnotationSession(engine, "bob"), 2)
    first = agreement_report(engine, bootstrap=40, seed=11)
    again = agreement_report(engine, bootstrap=40, seed=11)
    other = agreement_report(engine, bootstrap=40, seed=12)
    pd.testing.assert_frame_equal(first, again)
    assert not first["ci_low"].equals(other["ci_low"])
    kappa = first[(first.statistic == "kappa") & (first.dimension == "precision")
                  & first.annotator_a.isna()].iloc[0]
    assert kappa["ci_low"] <= kappa["value"] <= kappa["ci_high"]


def test_no_statistic_is_ever_nan(tmp_path):
    from reports.agreement import agreement_report
    from storage.models import Stage
    from storage.rating.rating_sessions import AnnotationSession
    from tests.app_helpers import sample_engine
    from tests.test_workflow import rate_everything

    engine = sample_engine(tmp_path)
    rate_everything(AnnotationSession(engine, "alice"), 1)
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND)
    for index in range(len(bob.images)):
        for group in bob.open_image(index):
            bob.set_values(group, {k: group.reference[k] for k in ("precision", "recall")},
                           image_index=index, focus=0)
    report = agreement_report(engine, bootstrap=10)
    main = report[~report["statistic"].str.startswith("confusion:")]
    undefined = main[main["value"].isna()]
    assert (undefined["note"].str.startswith("undefined: ")).all()
    binary = main[(main["dimension"] == "fluency_error") & (main["statistic"] == "within_1")]
    assert binary["note"].str.contains("yes/no").all()


def test_agreement_text_fits_80_columns_and_shows_the_confusion_counts(tmp_path):
    from reports.agreement import agreement_report
    from reports.thumb.text import agreement_text
    from storage.models import Stage
    from storage.rating.rating_sessions import AnnotationSession
    from tests.app_helpers import sample_engine
    from tests.test_workflow import rate_everything

    engine = sample_engine(tmp_path)
    rate_everything(AnnotationSession(engine, "alice"), 1)
    bob = AnnotationSession(engine, "bob", stage=Stage.SECOND)
    lowered = 0
    for index in range(len(bob.images)):
        for group in bob.open_image(index):
            values = {k: group.reference[k] for k in ("precision", "recall")}
            if lowered < 3 and values["precision"] > 1:
                values["precision"] -= 1
                lowered += 1
            bob.set_values(group, values, image_index=index, focus=0)
    report = agreement_report(engine, bootstrap=10)
    text = agreement_text(report, markdown=False, ci=0.9, bootstrap=10)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert '"alice" & "bob"' in text and "all pairs" not in text  # one pair: no repeat
    number = text.split("undefined (")[-1].split(")")[0]  # within-1 of fluency>0, last
    assert f"({number}) within-1 is not meaningful for a yes/no dimension" in text
    precision = report[(report["dimension"] == "precision")
                       & report["statistic"].str.startswith("confusion:")
                       & report["annotator_a"].isna()]
    off_diagonal = {s: v for s, v in zip(precision["statistic"], precision["value"],
                                         strict=True)
                    if s.split(":")[1].split("->")[0] != s.split("->")[1]}
    assert sum(off_diagonal.values()) == lowered
    matrix = text[text.index("rows: stage 1, columns: stage 2"):].splitlines()[2:8]
    first, second = next(iter(off_diagonal)).removeprefix("confusion:").split("->")
    header = matrix[0].split()[:6]
    row = next(line.split() for line in matrix[1:] if line.split()[0] == first)
    assert int(row[header.index(second)]) == off_diagonal[f"confusion:{first}->{second}"]
    markdown = agreement_text(report, markdown=True, ci=0.9, bootstrap=10)
    assert '### "alice" & "bob"' in markdown and "| kappa " in markdown


def test_agreement_text_counts_one_image_in_the_singular(tmp_path):
    from reports.agreement import agreement_report
    from reports.thumb.text import agreement_text
    from tests.app_helpers import sample_engine
    from tests.test_workflow import review_with_changes

    engine = sample_engine(tmp_path)
    review_with_changes(engine)
    report = agreement_report(engine, bootstrap=10).assign(n=1, images=1)
    text = agreement_text(report, markdown=False, ci=0.9, bootstrap=10)
    assert "1 caption, 1 image" in text and "1 images" not in text


@pytest.mark.slow
def test_a_pair_is_two_annotators_however_their_names_read(tmp_path):
    """Two columns in the tidy output, each name quoted and escaped for its medium in the
    rendered ones: "a|b" and "<i>c</i>" never read as three people or as markup."""
    import json

    from typer.testing import CliRunner

    from tests.conftest import SAMPLE_CSV
    from thumb_tui.cli import app

    ratings = (SAMPLE_CSV.parent / "example_ratings.csv").read_text(encoding="utf-8")
    renamed = tmp_path / "ratings.csv"
    renamed.write_text(ratings.replace(",ann-a,", ",a|b,").replace(",ann-b,", ",<i>c</i>,"),
                       encoding="utf-8")
    db = str(tmp_path / "a.db")

    def thumb(*args: str) -> str:
        result = CliRunner().invoke(app, ["--db", db, *args])
        assert result.exit_code == 0, result.output
        return result.output

    thumb("import", str(SAMPLE_CSV))
    thumb("import", str(renamed))
    records = json.loads(thumb("agreement", "--format", "json", "--bootstrap", "0"))
    assert {(r["annotator_a"], r["annotator_b"]) for r in records} == {
        (None, None), ("a|b", "<i>c</i>")}  # every pair together, then the one pair
    assert "pair" not in records[0]
    header = thumb("agreement", "--format", "csv", "--bootstrap", "0").splitlines()[0]
    assert header.split(",")[1:3] == ["annotator_a", "annotator_b"]
    assert '"a|b" & "<i>c</i>": 60 captions' in thumb("agreement", "--bootstrap", "0")
    markdown = thumb("agreement", "--format", "md", "--bootstrap", "0")
    assert '### "a|b" & "&lt;i>c&lt;/i>": 60 captions' in markdown
    assert "<i>" not in markdown
    latex = thumb("agreement", "--format", "latex", "--bootstrap", "0")
    assert r'\caption{"a|b" \& "<i>c</i>": 60 captions, 15 images}' in latex
