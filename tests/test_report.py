"""The report's statistics against SciPy and worked examples, and the report itself,
including the THUMB paper's Tables 2-4 on the released data."""

from __future__ import annotations

import itertools
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from metrics.registry import MetricOptions
from metrics.stats.correlation import (
    correlation,
    correlation_ci,
    image_weights,
    pairwise_records,
    strict_best_worst,
    weighted_pearson,
    weighted_ranks,
    williams_test,
)
from reports.scoring import compute_metrics
from reports.thumb.render import markdown_table, write_report
from reports.thumb.tables import build_report
from storage import import_captions, import_thumb, open_database
from tests.conftest import SAMPLE_CSV, THUMB_JSONL, THUMB_REFS, needs_anchors


def test_weighted_statistics_match_scipy_on_resampled_data():
    rng = np.random.default_rng(0)
    x = rng.integers(1, 6, 40).astype(float)
    y = x + rng.normal(0, 1.5, 40)
    weights = rng.integers(0, 3, (6, 40)).astype(float)
    weights[:, 0] += 1
    for row, r in zip(weights, weighted_pearson(x, y, weights), strict=True):
        resampled = np.repeat(np.arange(40), row.astype(int))
        assert r == pytest.approx(stats.pearsonr(x[resampled], y[resampled]).statistic)
        ranks = weighted_ranks(x, row[None, :])[0]
        assert ranks[resampled] == pytest.approx(stats.rankdata(x[resampled]))
    uniform = np.ones((1, 40))
    assert weighted_pearson(x, y, uniform)[0] == pytest.approx(stats.pearsonr(x, y).statistic)


@pytest.mark.parametrize("seed", range(9))
def test_point_correlations_match_scipy_on_tied_data(seed):
    """Our Pearson, Spearman and Kendall tau-b/tau-c (computed without scipy.stats, which
    costs a second of start-up) against SciPy on data full of ties in either variable."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(10, 400))
    x = rng.integers(1, 6, size) + rng.choice([0.0, 0.5], size)  # Likert-like, many ties
    y = np.round(x + rng.normal(0, 2, size), int(rng.integers(0, 3)))
    if seed % 2:
        x, y = y, x
    if seed % 3 == 0:  # many distinct values on both sides (the pair count's other path)
        x, y = np.round(y + rng.normal(0, 1, size), 2), np.round(y, 1)
    expected = {"pearson": stats.pearsonr(x, y).statistic,
                "spearman": stats.spearmanr(x, y).statistic,
                "kendall-b": stats.kendalltau(x, y, variant="b").statistic,
                "kendall-c": stats.kendalltau(x, y, variant="c").statistic}
    for method, value in expected.items():
        assert correlation(x, y, method) == pytest.approx(value, rel=1e-14, abs=1e-15), method


@pytest.mark.parametrize("x, y", [([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]), ([1.0], [2.0]),
                                  ([1.0, np.nan, 3.0], [1.0, 2.0, 3.0])])
def test_point_correlations_are_nan_where_scipy_has_none(x, y):
    for method in ("pearson", "spearman", "kendall-b", "kendall-c"):
        assert np.isnan(correlation(np.array(x), np.array(y), method))


def test_bootstrap_cis_are_reproducible_with_a_seed():
    rng = np.random.default_rng(1)
    images = np.repeat(np.arange(30), 4)
    x, y = rng.normal(size=120), rng.normal(size=120)
    first, again, other = (
        correlation_ci(x, y, "spearman", image_weights(images, 200, seed, jackknife=True),
                       0.9, bootstrap=200) for seed in (5, 5, 6))
    assert first == again and first != other
    assert first.low <= stats.spearmanr(x, y).statistic <= first.high


def test_williams_test_worked_example():
    # Howell, Statistical Methods for Psychology: r12 .80, r13 .72, r23 .89, n 26
    t, p = williams_test(0.80, 0.72, 0.89, 26)
    assert t == pytest.approx(1.361, abs=5e-4)
    assert 2 * p == pytest.approx(0.187, abs=5e-4)


def test_pairwise_accuracy_on_constructed_pairs():
    data = pd.DataFrame({
        "image_id": ["a", "a", "a", "b", "b"],
        "total": [5.0, 4.0, 4.0, 3.0, 2.0],
        "good": [0.9, 0.5, 0.1, 0.7, 0.2],  # agrees with every decided pair
        "flat": [0.5, 0.5, 0.5, 0.5, 0.5],  # ties everywhere
        "bad": [0.1, 0.5, 0.9, 0.2, 0.7],
    })
    records = pairwise_records(data, ["good", "flat", "bad"], bootstrap=0, ci=0.9,
                               seed=0).set_index("metric")
    assert records.loc["good", "pairs"] == 3  # the 4.0/4.0 pair is left out
    assert records.loc["good", "accuracy"] == 1.0 and records.loc["bad", "accuracy"] == 0.0
    assert records.loc["flat", "ties"] == 3 and np.isnan(records.loc["flat", "accuracy"])


def test_strict_best_and_worst_count_ties_on_both_dimensions():
    data = pd.DataFrame({
        "image_id": ["a", "a", "a", "b", "b"], "system": ["H", "M", "N", "H", "M"],
        "precision": [5, 5, 3, 4, 4], "recall": [5, 4, 3, 4, 4]})
    table = strict_best_worst(data).set_index("system")
    assert table.loc["H"].tolist() == [2, 1]  # best on a; tied best and worst on b
    assert table.loc["N"].tolist() == [0, 1]


@pytest.fixture
def sample_report_db(tmp_path):
    engine = open_database(tmp_path / "r.db")
    import_captions(engine, SAMPLE_CSV, actor="t")
    import_captions(engine, SAMPLE_CSV.parent / "example_ratings.csv", actor="t")
    compute_metrics(engine, ["bleu", "rouge-l", "cider-d"], MetricOptions(tokenizer="ptb-python"))
    return engine


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_report_formats(sample_report_db, tmp_path, fmt):
    report = build_report(sample_report_db, bootstrap=50, seed=1)
    path = write_report(report, tmp_path / "out", fmt)
    text = path.read_text(encoding="utf-8")
    if fmt == "json":
        data = json.loads(text)
        assert set(data["systems"][0]) >= {"system", "n", "precision", "recall", "fluency",
                                           "conciseness", "inclusive", "total", "total_ci_low",
                                           "total_ci_high", "total_ci_warning", "bleu"}
        assert set(data["correlations"][0]) == {"metric", "dimension", "subset", "method", "r",
                                                "ci_low", "ci_high", "n", "ci_warning"}
        assert {r["subset"] for r in data["correlations"]} == {"all", "without:Human"}
        assert set(data["pairwise"][0]) == {"metric", "accuracy", "ci_low", "ci_high", "pairs",
                                            "ties", "ci_warning"}
        assert data["header"]["ci_method"] == "bca"
        assert set(data["strict"][0]) == {"system", "best", "worst"}
        assert data["signatures"]["cider-d"].startswith("cider-d|")
        assert data["header"]["final_scores"] == {"stage 2": 60}
        assert data["summary"][0].startswith("60 captions of 15 images from 4 systems")
        assert {r["statistic"] for r in data["agreement"]} >= {"alpha_interval", "kappa"}
    else:
        assert "Signatures" in text and "cider-d|impl:thumb-tui-sparse" in text
        assert "THUMB Table 2" in text and "Williams" in text
        if fmt == "html":
            assert text.count("data:image/svg+xml;base64,") == 1 + len(report.signatures)
            assert "<h1>r</h1>" in text  # the project's name (its database file's)
            assert '<section id="summary" class="summary">' in text
            # the contents link every section, and only sections that are there
            links = re.findall(r'<a href="#([^"]+)">', text)
            assert links and links == re.findall(r'<section id="(s[^"]+)">', text)
            assert text.count("<figcaption><b>Figure ") == 1 + len(report.signatures)
            assert "@media print" in text and "<script" not in text
        else:
            assert "(figure2.svg)" in text and (tmp_path / "out" / "figure2.svg").is_file()
            assert "(scatter-cider-d.svg)" in text


def test_the_summary_states_the_findings_with_their_numbers(sample_report_db):
    """Each fact recomputed from the captions: systems ranked by mean Total, each pair of
    neighbours with the difference of their mean Totals over the images both captioned
    (called by `metrics.stats.significance`'s rule), the metric with the highest Pearson r with the
    Total, and the agreement of the two stages."""
    from reports.thumb.summary import summarize

    report = build_report(sample_report_db, bootstrap=200, seed=0)
    summary = summarize(report)
    totals = report.data.groupby("system")["total"].mean().sort_values(ascending=False)
    assert [s.name for s in summary.ranking] == totals.index.tolist()
    assert [s.total for s in summary.ranking] == pytest.approx(totals.tolist())
    by_system = report.data.pivot(index="image_id", columns="system", values="total")
    assert len(summary.neighbours) == len(totals) - 1
    for pair, (upper, lower) in zip(summary.neighbours, itertools.pairwise(totals.index),
                                    strict=True):
        shared = by_system[[upper, lower]].dropna()
        assert (pair.upper, pair.lower) == (upper, lower)
        assert pair.difference == pytest.approx((shared[upper] - shared[lower]).mean())
        if pair.significant:  # a call needs the CI to leave out 0 (and more: see below)
            assert not pair.ci_low <= 0 <= pair.ci_high
        row = report.differences.set_index(["system", "versus"]).loc[(upper, lower)]
        assert pair.verdict == row["verdict"]  # the rule's call, as the table makes it
    best = summary.best_metrics[0]
    r = {m: np.corrcoef(report.data[m], report.data["total"])[0, 1] for m in report.signatures}
    ranked = sorted(r, key=r.get, reverse=True)
    assert (best.subset, best.metric, best.runner_up) == ("all", ranked[0], ranked[1])
    assert best.r == pytest.approx(r[ranked[0]])
    sentences = summary.sentences()
    assert sentences[0].startswith("60 captions of 15 images from 4 systems")
    ranking = next(s for s in sentences if s.startswith("Systems ranked"))
    assert ranking.index(totals.index[0]) < ranking.index(totals.index[-1])
    assert f"{totals.iloc[0]:.2f}" in ranking
    from dataclasses import replace

    from reports.thumb.summary import RankedSystem

    tied = replace(summary, ranking=[RankedSystem(name, total, math.nan, math.nan)
                                     for name, total in (("S", 3.0), ("T", 3.0), ("U", 2.5))])
    assert "S 3.00 = T 3.00 > U 2.50." in next(
        s for s in tied.sentences() if s.startswith("Systems ranked"))  # a tie is no rank
    neighbours = next(s for s in sentences if s.startswith("Neighbours in the ranking"))
    first = summary.neighbours[0]
    assert f"{first.upper} − {first.lower} = {first.difference:+.2f}" in neighbours
    assert any(f"{ranked[0]} agrees best" in s and f"{r[ranked[0]]:.3f}" in s
               and "Williams' test" in s for s in sentences)
    # example_ratings.csv: the reviews change a few P and R values and leave every Total
    agreement = next(s for s in sentences if s.startswith("Agreement between annotators"))
    assert "stage 1 vs stage 2" in agreement and "Total 1.00" in agreement


def test_markdown_report_reads_in_an_80_column_terminal(sample_report_db, tmp_path):
    report = build_report(sample_report_db, bootstrap=20, seed=1)
    text = write_report(report, tmp_path / "out", "md").read_text(encoding="utf-8")
    wide = [line for line in text.splitlines() if line.startswith("|") and len(line) > 80]
    assert wide == []
    assert "- systems: Human, Show-Tell, Up-Down, VinVL-base" in text
    assert "- final scores: stage 2: 60" in text and "- metrics skipped: none" in text
    assert "- annotators: ann-a, ann-b" in text and "- annotators of final scores: ann-b" in text
    human = report.systems.set_index("system").loc["Human"]
    row = next(line for line in text.splitlines() if line.startswith("| Human "))
    assert row.endswith(f"{human['total']:.2f} [{human['total_ci_low']:.2f}, "
                        f"{human['total_ci_high']:.2f}] |")


def test_markdown_table_escapes_pipes_in_string_columns():
    frame = pd.DataFrame({"model": ["a|b", "c"], "value": [1.0, 2.0]})
    frame["model"] = frame["model"].astype("string")
    rows = markdown_table(frame, index=False).splitlines()
    assert [row.replace("\\|", "").count("|") for row in rows] == [3, 3, 3, 3]
    assert "a\\|b" in rows[2]


def test_unknown_excluded_system_is_an_error(sample_report_db):
    with pytest.raises(ValueError, match="'Nobody' is not a system"):
        build_report(sample_report_db, exclude_systems=["Nobody"], bootstrap=0)


TABLE_3 = {"Human": (327, 65), "VinVL-large": (180, 128), "VinVL-base": (161, 150),
           "Unified-VLP": (112, 190), "Up-Down": (74, 269)}


@pytest.fixture(scope="module")
def thumb_report(tmp_path_factory):
    engine = open_database(tmp_path_factory.mktemp("thumb") / "t.db")
    import_thumb(engine, THUMB_JSONL, THUMB_REFS, actor="t")
    compute_metrics(engine, ["bleu", "rouge-l", "cider-d"],
                    MetricOptions(keep_self_references=True))
    return build_report(engine, bootstrap=100, seed=0)


@pytest.mark.slow
@needs_anchors
def test_thumb_tables_2_and_3_best(thumb_report):
    systems = thumb_report.systems.set_index("system")
    assert systems.loc["Human", ["precision", "recall", "total"]].round(2).tolist() == [
        4.82, 4.35, 4.56]
    assert systems.loc["Up-Down", ["precision", "recall", "total"]].round(2).tolist() == [
        4.29, 3.50, 3.88]
    strict = thumb_report.strict.set_index("system")
    assert {s: int(strict.loc[s, "best"]) for s in TABLE_3} == {
        s: best for s, (best, _) in TABLE_3.items()}


@needs_anchors
@pytest.mark.xfail(strict=True, reason="the published worst counts (65/128/150/190/269) are "
                   "not reproduced by 'P and R both at most every other caption's' (we get "
                   "73/136/158/199/284); the paper's exact tie rule for worst is unknown")
def test_thumb_table_3_worst(thumb_report):
    strict = thumb_report.strict.set_index("system")
    assert {s: int(strict.loc[s, "worst"]) for s in TABLE_3} == {
        s: worst for s, (_, worst) in TABLE_3.items()}


@pytest.mark.slow
@needs_anchors
def test_thumb_table_4_from_the_report(thumb_report):
    from tests.test_metrics_text import TABLE_4

    pearson = thumb_report.correlations[thumb_report.correlations["method"] == "pearson"]
    for metric, expected in TABLE_4.items():
        part = pearson[pearson["metric"] == metric].set_index(["subset", "dimension"])["r"]
        observed = [part[(subset, dimension)] for subset in ("all", "without:Human")
                    for dimension in ("precision", "recall", "total")]
        assert observed == pytest.approx(expected, abs=0.01), metric


@pytest.mark.parametrize("command", [["agreement"], ["report"], ["bison", "report"]])
@pytest.mark.parametrize("level", ["1.5", "90", "0"])
def test_a_confidence_level_outside_0_1_is_refused(sample_report_db, command, level):
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    result = CliRunner().invoke(app, ["--db", str(sample_report_db.url.database), *command,
                                      "--ci", level])
    assert result.exit_code == 2
    assert "Invalid value for '--ci'" in result.output and "between 0 and 1" in result.output


def test_library_calls_refuse_a_bad_confidence_level(sample_report_db):
    from reports.agreement import agreement_report
    from reports.bison import bison_report

    for call in (build_report, agreement_report, bison_report):
        with pytest.raises(ValueError, match="must be between 0 and 1"):
            call(sample_report_db, ci=90)


def test_metrics_undefined_without_references_are_reported_as_such(tmp_path):
    """An image without references: its captions have no BLEU/ROUGE-L/CIDEr-D; the report
    keeps the metrics, computes their statistics on the other captions and says so."""
    from sqlalchemy import delete, select

    from storage.models import ImageReference

    engine = open_database(tmp_path / "r.db")
    import_captions(engine, SAMPLE_CSV, actor="t")
    import_captions(engine, SAMPLE_CSV.parent / "example_ratings.csv", actor="t")
    table = ImageReference.__table__
    with engine.begin() as connection:
        image = connection.execute(select(table.c.image_id).limit(1)).scalar_one()
        connection.execute(delete(table).where(table.c.image_id == image))
    compute_metrics(engine, ["bleu", "rouge-l", "cider-d"], MetricOptions(tokenizer="ptb-python"))
    report = build_report(engine, bootstrap=20, seed=1)
    assert set(report.signatures) == {"bleu", "rouge-l", "cider-d"}
    assert report.header["metrics_skipped"] == {}
    undefined = report.header["metrics_undefined"]
    assert set(undefined) == {"bleu", "rouge-l", "cider-d"}
    assert all(text.endswith("captions (no references)") for text in undefined.values())
    count = int(undefined["bleu"].split()[2])
    assert count > 0
    all_captions = report.correlations.query("subset == 'all'")
    assert set(all_captions["n"]) == {60 - count}
    assert report.correlations["r"].notna().all()
    assert (report.pairwise["pairs"] > 0).all()


def test_caption_pairs_follow_images_then_rows_whatever_the_group_sizes():
    from metrics.stats.correlation import caption_pairs

    data = pd.DataFrame({"image_id": [3, 1, 3, 2, 1, 3, 2, 1],
                         "total": [1.0, 2.0, 3.0, 1.0, 1.0, 3.0, 1.0, 5.0]},
                        index=[10, 11, 12, 13, 14, 15, 16, 17])
    first, second, image = caption_pairs(data)
    expected = [(11, 14, 1), (11, 17, 1), (14, 17, 1), (10, 12, 3), (10, 15, 3)]
    assert list(zip(first.tolist(), second.tolist(), image.tolist(), strict=True)) == expected


def test_figures_are_well_formed_svg_with_escaped_labels_and_the_data_drawn(
        sample_report_db, tmp_path):
    import xml.etree.ElementTree as ElementTree

    from reports.thumb.figures import HUMAN, draw_figures

    report = build_report(sample_report_db, bootstrap=0)
    hostile = 'bleu</text><script>alert(1)</script>\x1b[31m&'
    report.data = report.data.rename(columns={"bleu": hostile})
    report.signatures = {hostile if m == "bleu" else m: s for m, s in report.signatures.items()}
    figures = {figure.data.title: figure.path for figure in draw_figures(report, tmp_path)}
    allowed = {"svg", "title", "rect", "line", "text", "g", "circle"}
    for path in figures.values():
        root = ElementTree.parse(path).getroot()  # well-formed XML, escapes included
        assert {element.tag.split("}")[1] for element in root.iter()} <= allowed
        assert "\x1b" not in path.read_text(encoding="utf-8")
    scatter = ElementTree.parse(figures[f"{hostile} vs human Total"])
    namespace = {"svg": "http://www.w3.org/2000/svg"}
    assert len(scatter.findall(".//svg:circle", namespace)) == len(report.data)
    texts = [text.text for text in scatter.findall(".//svg:text", namespace)]
    assert hostile.replace("\x1b", "\\x1b") + " (metric score)" in texts
    assert "human Total (points, 5 best)" in texts  # axis labels say their units
    # one colour per system, the legend naming each: a system's dots are its captions
    groups = scatter.findall(".//svg:g", namespace)
    assert len({group.get("fill") for group in groups}) == report.data["system"].nunique()
    assert sorted(len(group) for group in groups) == sorted(
        report.data["system"].value_counts().tolist())
    assert set(report.data["system"]) <= set(texts)
    # Figure 2: one bar per score level and group, heights proportional to the shares
    figure2 = ElementTree.parse(tmp_path / "figure2.svg")
    assert {"score (1–5)", "share of captions (%)", "machine", "Human"} <= {
        text.text for text in figure2.findall(".//svg:text", namespace)}
    bars = [rect for rect in figure2.findall(".//svg:rect", namespace)
            if rect.get("fill") == HUMAN and rect.get("height") and float(rect.get("width")) > 10]
    human = report.data[report.data["system"] == "Human"]
    shares = human["precision"].value_counts(normalize=True).reindex(range(1, 6), fill_value=0)
    heights = np.array([float(bar.get("height")) for bar in bars[:5]])
    assert heights / heights.max() == pytest.approx(shares / shares.max(), abs=0.01)


def test_report_print_figures_option(sample_report_db, tmp_path):
    from typer.testing import CliRunner

    from thumb_tui.cli import app

    db = sample_report_db.url.database
    runner = CliRunner()
    result = runner.invoke(app, ["--db", db, "report", "--format", "json", "--out",
                                 str(tmp_path / "j"), "--print-figures"])
    assert result.exit_code == 2 and ("--print-figures goes with --format md, html or latex"
                                      in result.output)
    result = runner.invoke(app, ["--db", db, "report", "--format", "html", "--out",
                                 str(tmp_path / "h"), "--print-figures", "--bootstrap", "0"])
    assert result.exit_code == 0, result.output
    written = {path.name for path in (tmp_path / "h").iterdir()}
    for stem in ("figure2", "scatter-bleu", "scatter-cider-d", "scatter-rouge-l"):
        assert {f"{stem}.svg", f"{stem}.pdf", f"{stem}.png"} <= written


def test_the_palette_is_okabe_and_itos():
    """Okabe & Ito (2008), "Color Universal Design", the colours as they publish them: a
    palette colour-blind readers tell apart."""
    from reports.thumb.figures import PALETTE

    published = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"}
    assert set(PALETTE) == published and len(PALETTE) == len(published)


@pytest.mark.slow
def test_print_figures_draw_the_svg_data_as_vector_pdf_and_300_dpi_png(sample_report_db,
                                                                       tmp_path):
    from PIL import Image

    from reports.plotting import pyplot
    from reports.thumb.figures import figure_data
    from reports.thumb.print_figures import PRINT_DPI, PRINT_SETTINGS, plot, write_print_figures

    report = build_report(sample_report_db, bootstrap=0)
    hostile = "bleu $x^2$ \x1b[31m $"  # mathtext off: shown as typed; a control byte escaped
    report.data = report.data.rename(columns={"bleu": hostile})
    report.signatures = {hostile if m == "bleu" else m: s for m, s in report.signatures.items()}
    figures = figure_data(report)
    written = write_print_figures(figures, tmp_path)
    assert sorted(path.name for path in written) == sorted(
        f"{figure.stem}{suffix}" for figure in figures for suffix in (".pdf", ".png"))
    for figure in figures:
        pdf = (tmp_path / f"{figure.stem}.pdf").read_bytes()
        assert pdf.startswith(b"%PDF") and b"/Subtype /Image" not in pdf  # vector only
        with Image.open(tmp_path / f"{figure.stem}.png") as image:
            assert image.info["dpi"] == pytest.approx((PRINT_DPI, PRINT_DPI), abs=0.01)
    histogram, scatter = figures[0], next(f for f in figures if f.title.startswith(hostile))
    with pyplot("print figures", **PRINT_SETTINGS) as plt:
        drawn = plot(scatter, plt)
        axes = drawn.axes[0]
        for collection, (group, (x, y)) in zip(axes.collections, scatter.points.groups.items(),
                                               strict=True):
            assert collection.get_label() == group
            np.testing.assert_array_equal(collection.get_offsets(), np.column_stack([x, y]))
        assert axes.get_xlabel() == "bleu $x^2$ \\x1b[31m $ (metric score)"
        plt.close(drawn)
        drawn = plot(histogram, plt)
        for axes, panel in zip(drawn.axes, histogram.bars, strict=True):
            heights = [patch.get_height() for patch in axes.patches]
            assert heights == pytest.approx(np.concatenate(list(panel.shares.values())))
        plt.close(drawn)


def test_a_metric_undefined_for_some_captions_is_averaged_over_the_others():
    """README: captions without references get no text-metric score, and the report
    computes the metric's statistics on the other captions: a system's mean over its
    defined captions (no CI for it), never a blank for the whole system."""
    from metrics.stats.correlation import system_table

    data = pd.DataFrame({"system": ["A"] * 4 + ["B"] * 4,
                         "image_id": ["i1", "i2", "i3", "i4"] * 2,
                         "precision": [5, 4, 3, 4, 2, 3, 2, 3.0],
                         "recall": [4, 4, 3, 2, 3, 2, 2, 2.0],
                         "total": [4.5, 4, 3, 3, 2.5, 2.5, 2, 2.5],
                         "bleu": [10.0, math.nan, 30.0, 20.0, 5.0, math.nan, 7.0, 9.0]})
    table = system_table(data, ["bleu"], scores=["precision", "recall"], bootstrap=200,
                         ci=0.9, seed=0).set_index("system")
    assert table.loc["A", "bleu"] == pytest.approx((10 + 30 + 20) / 3)
    assert table.loc["B", "bleu"] == pytest.approx((5 + 7 + 9) / 3)
    assert "bleu_ci_low" not in table  # undefined for some captions of each: no CI
    assert not math.isnan(table.loc["A", "total_ci_low"])


def test_the_markdown_summary_writes_a_comparison_as_text_not_as_an_html_entity(
        sample_report_db, tmp_path):
    """Issue #44 item 11: the ranking `A 4.95 [..] > B 4.19 [..]` read `&gt;` in the
    Markdown file (and `p < 0.001` would have read `&lt;`)."""
    report = build_report(sample_report_db, bootstrap=0)
    text = write_report(report, tmp_path / "out", "md").read_text(encoding="utf-8")
    summary = text.split("## Summary")[1].split("## Settings")[0]
    ranking = next(line for line in summary.splitlines() if line.startswith("- Systems ranked"))
    assert " > " in ranking
    assert "&gt;" not in summary and "&lt;" not in summary and "&amp;" not in summary


def test_the_williams_table_of_the_trial_fits_80_columns_in_the_tables_wording(
        sample_report_db, tmp_path):
    """Issue #44 item 11: a significant Williams test of spice-approx without Human made
    the Markdown table 82 columns wide, its subset `without:Human` where every other table
    (LaTeX's Tables 4 and correlations) says `w/o Human`: one wording, within 80."""
    from dataclasses import replace

    from reports.thumb.latex import williams
    from reports.thumb.render import to_markdown

    report = build_report(sample_report_db, bootstrap=0)
    trial = {"metric": "spice-approx", "versus": "cider-d", "dimension": "total",
             "subset": "without:Human", "r_metric": 0.548, "r_versus": 0.360, "n": 45,
             "t": 1.8, "p": 0.037}
    report = replace(report, williams=pd.DataFrame([trial]))
    markdown = to_markdown(report)
    table = markdown.split("## Williams test")[1].split("\n\n")[1].splitlines()
    assert "w/o Human" in table[2] and max(map(len, table)) <= 80
    assert "without:Human" not in markdown  # Table 4 says it as the others do too
    assert [row[3] for row in williams(report).rows] == ["w/o Human"]
