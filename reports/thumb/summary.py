"""What a report's numbers say, as plain data and sentences any renderer can print (HTML,
Markdown, LaTeX): the systems ranked by human Total with their CIs and which neighbours
differ significantly (a paired bootstrap of their difference); per subset, the metric that
agrees best with the human Total and whether Williams' test says it beats the next;
agreement between annotators; per judgment set, the metric that agrees best with its
judges. Whether a comparison is called significant is `metrics.stats.significance`'s rule (too
few images or captions, or a limit within resampling noise of 0, make no call). The
sentences hold stored text (system and metric names) unescaped: each renderer escapes
them for its medium."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pandas as pd

from metrics.stats.agreement import over_every_pair
from metrics.stats.significance import MIN_UNITS, NOISE_SES, Verdict, p_value_call
from reports.judgments import JudgmentReport, metrics_hint
from reports.numbers import ci_bounds, mean_with_ci
from reports.thumb.tables import Report, score_labels

AGREEMENT_STATISTIC = "alpha_interval"  # Krippendorff's alpha on the interval scale
# how the summary names each call on a pair of neighbours, in the order it lists them
VERDICT_WORDS = {
    Verdict.SIGNIFICANT: "significantly different",
    Verdict.BORDERLINE: "borderline (depends on the resampling seed: a CI limit within "
                        f"{NOISE_SES:g} Monte-Carlo standard errors of 0)",
    Verdict.NOT_SIGNIFICANT: "not significantly different (the CI holds 0)",
    Verdict.TOO_FEW: f"too few images to call (fewer than {MIN_UNITS} both captioned)",
}
KIND_WORDS = {"blind": "blind double ratings, two independent stage-1 ratings",
              "stage1-vs-stage2": "stage 1 vs stage 2, the reviewer saw the first scores"}


@dataclass(frozen=True)
class RankedSystem:
    name: str
    total: float
    ci_low: float  # NaN without a bootstrap
    ci_high: float
    ci_warning: str | None = None  # why the CI is unreliable (too few images), if it is

    def text(self) -> str:
        return f"{self.name} {mean_with_ci(self.total, self.ci_low, self.ci_high)}"


@dataclass(frozen=True)
class Difference:
    """Two neighbours in the ranking: the difference of their mean Totals over the images
    both captioned, its paired CI, and the call on it (`metrics.stats.significance`)."""

    upper: str
    lower: str
    difference: float
    ci_low: float  # NaN without a bootstrap
    ci_high: float
    verdict: Verdict | None  # None without a bootstrap: no call

    @property
    def significant(self) -> bool:
        return self.verdict is Verdict.SIGNIFICANT

    def text(self) -> str:
        interval = "" if math.isnan(self.ci_low) else f" {ci_bounds(self.ci_low, self.ci_high)}"
        return f"{self.upper} − {self.lower} = {self.difference:+.2f}{interval}"


@dataclass(frozen=True)
class BestMetric:
    """The metric of a subset with the highest Pearson r with the human Total, and the
    runner-up with Williams' one-sided p that the best's r is higher (None: one metric)
    over the captions both score."""

    subset: str
    metric: str
    r: float
    ci_low: float
    ci_high: float
    runner_up: str | None
    runner_up_r: float
    williams_p: float
    williams_captions: int
    ci_warning: str | None = None  # why the CI of r is unreliable (too few images), if it is


@dataclass(frozen=True)
class AgreementFact:
    """Krippendorff's interval alpha between annotators over all pairs of one kind."""

    kind: str
    captions: int
    alphas: dict[str, float]  # score label (P, R, Total) -> alpha


@dataclass(frozen=True)
class JudgmentFinding:
    """A judgment set (reports.judgments): its size and the metric that agrees best with
    its judges — the highest Pearson r with their scores, or for pairwise choices the
    highest accuracy against the majority — with the runner-up and, for scores, Williams'
    one-sided p that the best's r is higher (over `williams_captions`). `best` is None
    where no metric scored it (`hint` says what to run)."""

    name: str
    captions: int
    judgments: int
    statistic: str  # "Pearson r" or "accuracy"
    best: str | None
    value: float
    ci_low: float
    ci_high: float
    runner_up: str | None
    runner_up_value: float
    williams_p: float  # NaN for pairwise choices, one metric, or an undefined test
    williams_captions: int
    hint: str | None  # why there is no metric to name, and the command that scores one

    def text(self) -> str:
        size = (f"Judgment set {self.name} ({self.captions} captions, {self.judgments} "
                "judgments)")
        if self.best is None:
            return f"{size}: {self.hint}."
        judges = ("the judges' scores" if self.statistic == "Pearson r"
                  else "the judges' majority choice")
        interval = ("" if math.isnan(self.ci_low)
                    else f" {ci_bounds(self.ci_low, self.ci_high)}")
        sentence = (f"{size}: {self.best} agrees best with {judges} ({self.statistic} "
                    f"{self.value:.3f}{interval})")
        if self.runner_up is None:
            return sentence + "; it is the only metric."
        sentence += f", ahead of {self.runner_up} ({self.runner_up_value:.3f})"
        if self.statistic != "Pearson r":
            return sentence + "."
        return f"{sentence}: {williams_verdict(self.williams_p, self.williams_captions)}."


def williams_verdict(p: float, captions: int) -> str:
    """Whether Williams' test over `captions` says the best metric's r is higher than the
    runner-up's (`metrics.stats.significance.p_value_call`: too few captions make no call)."""
    if math.isnan(p):
        return "Williams' test is undefined here"
    call = p_value_call(p, captions)
    if call.verdict is Verdict.TOO_FEW:
        return f"too few captions to call by Williams' test ({call.reason}; {_p(p)})"
    if call.significant:
        return f"significantly higher by Williams' test ({_p(p)})"
    return f"not significantly higher by Williams' test ({_p(p)})"


def subset_words(subset: str) -> str:
    """A correlation subset in words: `all` -> all captions, `without:X` -> captions
    without X."""
    return ("all captions" if subset == "all"
            else subset.replace("without:", "captions without ", 1))


def counted(count: int, noun: str) -> str:
    """`1 caption`, `60 captions`."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def header_count(header: dict[str, object], key: str) -> int:
    """How many a header entry counts: its number, or how many names it lists (systems);
    0 where it is absent."""
    value = header.get(key)
    if isinstance(value, list | tuple):
        return len(value)
    return value if isinstance(value, int) else 0


def scope_sentence(header: dict[str, object]) -> str:
    """What the report covers: the project's captions, images and systems, how many of
    them are rated so far (while that is not all) and where the final scores come from."""
    captions = header_count(header, "captions")
    if not captions:
        return "The project has no captions of its own."
    systems = header_count(header, "systems")
    rated = header_count(header, "rated_captions")
    final = header.get("final_scores")
    sources = (", ".join(f"{count} from {source}" for source, count in final.items())
               if isinstance(final, dict) else str(final))
    return (f"{counted(captions, 'caption')} of "
            f"{counted(header_count(header, 'images'), 'image')}"
            + (f" from {counted(systems, 'system')}" if systems else "")
            + (f", {counted(rated, 'caption')} of "
               f"{counted(header_count(header, 'rated_images'), 'image')} rated so far"
               if rated < captions else "")
            + f"; final human scores: {sources or 'none yet'}.")


@dataclass(frozen=True)
class Summary:
    scope: str
    ci: float
    ranking: tuple[RankedSystem, ...]
    neighbours: tuple[Difference, ...]  # each pair of neighbours in the ranking
    best_metrics: tuple[BestMetric, ...]
    agreement: AgreementFact | None
    has_ratings: bool  # complete human ratings exist (agreement may still have no pairs)
    not_computed: int = 0  # groups of tables that cannot be computed yet
    judgment_sets: tuple[JudgmentFinding, ...] = ()
    out_of_date: tuple[str, ...] = ()  # `LABEL is out of date: it scores N of M …; update: …`

    def sentences(self) -> list[str]:
        """The findings in sentences with their numbers, most important first."""
        lines = [self.scope]
        if self.ranking:
            lines.append(f"Systems ranked by human Total ({self._ci_words()}): "
                         + self._ranking_text() + ".")
        tested = [pair for pair in self.neighbours if pair.verdict is not None]
        if tested:
            verdicts = [f"{words}: {', '.join(pairs)}" for verdict, words in VERDICT_WORDS.items()
                        if (pairs := [p.text() for p in tested if p.verdict is verdict])]
            lines.append("Neighbours in the ranking, by the difference of their mean Totals "
                         f"over the images both captioned (paired {self.ci:.0%} BCa CI): "
                         + "; ".join(verdicts) + ".")
        lines += [self._metric_sentence(best) for best in self.best_metrics]
        lines += [f"{metric}." for metric in self.out_of_date]
        if self.agreement is not None:
            fact = self.agreement
            values = ", ".join(f"{label} {alpha:.2f}" for label, alpha in fact.alphas.items())
            lines.append(f"Agreement between annotators (Krippendorff's alpha, interval; "
                         f"{KIND_WORDS.get(fact.kind, fact.kind)}; {fact.captions} captions): "
                         f"{values}. Point estimates: thumb agreement gives their CIs and "
                         "the other statistics.")
        elif self.has_ratings:
            lines.append("Agreement between annotators: no caption has two ratings to "
                         "compare (blind double ratings or stage 2 reviews).")
        lines += [finding.text() for finding in self.judgment_sets]
        if self.not_computed:
            lines.append(f"{self.not_computed} group(s) of tables not computed yet: the "
                         "section \"Not computed yet\" says what each needs and the command "
                         "that makes it.")
        return lines

    def _ranking_text(self) -> str:
        """The systems best first, `>` between two whose mean Totals differ and `=`
        between two that tie (a tie is no ranking)."""
        text = self.ranking[0].text()
        for upper, lower in itertools.pairwise(self.ranking):
            text += f" {'=' if upper.total == lower.total else '>'} {lower.text()}"
        return text

    def _ci_words(self) -> str:
        if self.ranking and math.isnan(self.ranking[0].ci_low):
            return "no CIs: --bootstrap 0"
        warning = next((system.ci_warning for system in self.ranking if system.ci_warning),
                       None)
        return f"{self.ci:.0%} BCa CIs over images" + (f"; {warning}" if warning else "")

    @staticmethod
    def _metric_sentence(best: BestMetric) -> str:
        where = subset_words(best.subset)
        interval = "" if math.isnan(best.ci_low) else f" {ci_bounds(best.ci_low, best.ci_high)}"
        if interval and best.ci_warning:
            interval += f"; {best.ci_warning}"
        sentence = (f"On {where}, {best.metric} agrees best with the human Total "
                    f"(Pearson r {best.r:.3f}{interval})")
        if best.runner_up is None:
            return sentence + "; it is the only metric."
        return (sentence + f", ahead of {best.runner_up} (r {best.runner_up_r:.3f}): "
                + williams_verdict(best.williams_p, best.williams_captions) + ".")


def _p(p: float) -> str:
    """A p-value as papers print it: three decimals, or below the smallest they show."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _ranking(systems: pd.DataFrame) -> tuple[RankedSystem, ...]:
    if systems.empty or systems["total"].isna().all():
        return ()
    rows = systems.reindex(columns=["system", "total", "total_ci_low", "total_ci_high",
                                    "total_ci_warning"])
    rows = rows.dropna(subset=["total"]).sort_values("total", ascending=False)
    return tuple(RankedSystem(str(name), float(total), float(low), float(high),
                              str(warning) if isinstance(warning, str) else None)
                 for name, total, low, high, warning in rows.itertuples(index=False))


def _neighbours(ranking: tuple[RankedSystem, ...], differences: pd.DataFrame
                ) -> tuple[Difference, ...]:
    """The paired difference of each pair of neighbours in the ranking."""
    if differences.empty:
        return ()
    by_pair = differences.set_index(["system", "versus"])
    found = []
    for upper, lower in itertools.pairwise(ranking):
        if (upper.name, lower.name) not in by_pair.index:
            continue  # no image captioned by both
        row = by_pair.loc[(upper.name, lower.name)]
        found.append(Difference(upper.name, lower.name, float(row["difference"]),
                                float(row["ci_low"]), float(row["ci_high"]),
                                None if pd.isna(row["verdict"]) else Verdict(row["verdict"])))
    return tuple(found)


def _best_metrics(correlations: pd.DataFrame, williams: pd.DataFrame
                  ) -> tuple[BestMetric, ...]:
    if correlations.empty:
        return ()
    pearson = correlations[(correlations["method"] == "pearson")
                           & (correlations["dimension"] == "total")].dropna(subset=["r"])
    found = []
    for subset, rows in pearson.groupby("subset", sort=False):
        ranked = rows.sort_values("r", ascending=False)
        best = ranked.iloc[0]
        runner_up = ranked.iloc[1] if len(ranked) > 1 else None
        p, captions = float("nan"), 0
        if runner_up is not None and not williams.empty:
            test = williams[(williams["metric"] == best["metric"])
                            & (williams["versus"] == runner_up["metric"])
                            & (williams["dimension"] == "total")
                            & (williams["subset"] == subset)]
            if len(test):
                p, captions = float(test["p"].iloc[0]), int(test["n"].iloc[0])
        found.append(BestMetric(
            str(subset), str(best["metric"]), float(best["r"]), float(best["ci_low"]),
            float(best["ci_high"]), None if runner_up is None else str(runner_up["metric"]),
            float("nan") if runner_up is None else float(runner_up["r"]), p, captions,
            best["ci_warning"] if isinstance(best.get("ci_warning"), str) else None))
    return tuple(found)


def _agreement(report: Report) -> AgreementFact | None:
    """Interval alpha over all pairs: of blind double ratings where there are any (the
    independent comparison), else of stage 1 vs stage 2."""
    records = report.agreement
    if records.empty:
        return None
    overall = records[over_every_pair(records)
                      & (records["statistic"] == AGREEMENT_STATISTIC)]
    kinds = list(dict.fromkeys(overall["kind"]))
    if not kinds:
        return None
    kind = "blind" if "blind" in kinds else kinds[0]
    rows = overall[overall["kind"] == kind].set_index("dimension")
    labels = score_labels(report.rubric)
    alphas = {label: float(rows.loc[key, "value"]) for key, label in labels.items()
              if key in rows.index}
    return AgreementFact(str(kind), int(rows["n"].max()), alphas)


def _judgment_finding(judgments: JudgmentReport) -> JudgmentFinding:
    """What the summary says of one judgment set, from its report's records: Pearson r
    for scores, accuracy over all pairs for pairwise choices."""
    header = judgments.header
    size = (judgments.info.name, int(header.get("captions", 0)),
            int(header.get("judgments_count", 0)))
    records = judgments.records
    score_set = judgments.info.kind == "score"
    chosen = (records[records["statistic"] == "pearson"] if score_set
              else records[records["category"] == "all"]).dropna(subset=["value"])
    statistic = "Pearson r" if score_set else "accuracy"
    if chosen.empty:
        hint = metrics_hint(judgments, str) or "no metric has a defined value for it"
        return JudgmentFinding(*size, statistic, None, math.nan, math.nan, math.nan, None,
                               math.nan, math.nan, 0, hint)
    ranked = chosen.sort_values("value", ascending=False)
    best = ranked.iloc[0]
    runner_up = ranked.iloc[1] if len(ranked) > 1 else None
    p, captions = math.nan, 0
    if runner_up is not None and score_set and len(judgments.differences):
        pair = {best["metric"], runner_up["metric"]}
        differences = judgments.differences
        test = differences[(differences["statistic"] == "pearson")
                           & differences["metric"].isin(pair)
                           & differences["versus"].isin(pair)]
        if len(test):
            p, captions = float(test["williams_p"].iloc[0]), int(test["n"].iloc[0])
    return JudgmentFinding(
        *size, statistic, str(best["metric"]), float(best["value"]), float(best["ci_low"]),
        float(best["ci_high"]), None if runner_up is None else str(runner_up["metric"]),
        math.nan if runner_up is None else float(runner_up["value"]), p, captions, None)


def summarize(report: Report) -> Summary:
    has_ratings = not report.data.empty and report.data["total"].notna().any()
    ranking = _ranking(report.systems) if has_ratings else ()
    return Summary(scope=scope_sentence(report.header), ci=float(report.header.get("ci", 0.9)),
                   ranking=ranking, neighbours=_neighbours(ranking, report.differences),
                   best_metrics=_best_metrics(report.correlations, report.williams),
                   agreement=_agreement(report), has_ratings=bool(has_ratings),
                   not_computed=len(report.missing),
                   judgment_sets=tuple(map(_judgment_finding, report.judgments)),
                   out_of_date=tuple(
                       f"{label} is out of date: it {why}" for label, why in
                       report.header.get("metrics_out_of_date", {}).items()))
