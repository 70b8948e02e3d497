"""Issue #27: the HTML report as a reader sees it, in headless chromium at 1280 px: no
horizontal overflow, every figure loaded, the summary there, no empty section; for the
sample project and the THUMB 1.0 release (when the anchors are present). A screenshot of
each page goes to $THUMB_SCREENSHOT_DIR (default: the test's tmp folder).

The report runs no script (its policy forbids it), so the measurements come from a probe:
a copy of the page whose policy also allows the probe's one inline script, which, once
every image has loaded, writes what it measured into the DOM that chromium dumps. The
report itself is never changed; that nothing in it runs is test_untrusted_output's
business."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from metrics.registry import MetricOptions
from reports.scoring import compute_metrics
from reports.thumb.render import CONTENT_SECURITY_POLICY, write_report
from reports.thumb.tables import build_report
from storage import import_captions, import_thumb, open_database
from tests.conftest import SAMPLE_CSV, THUMB_JSONL, THUMB_REFS, needs_anchors

CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser")
                 if shutil.which(name)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
WIDTH = 1280
SCREENSHOT_HEIGHT_LIMIT = 16000  # pixels; a longer page is cut there in the screenshot
PROBE = """<script>
addEventListener("load", () => {
  const root = document.documentElement;
  const images = [...document.querySelectorAll("img")];
  const sections = [...document.querySelectorAll("section")];
  const empty = sections.filter(section => ![...section.children].some(child =>
    child.tagName !== "H2" && (child.textContent.trim() || child.querySelector("img"))));
  const wide = [...document.body.querySelectorAll("*")].filter(element =>
    element.getBoundingClientRect().right > root.clientWidth + 0.5
    && !element.closest(".table-wrap"));
  const result = {
    viewport: innerWidth, scrollWidth: root.scrollWidth, height: root.scrollHeight,
    images: images.length,
    unloaded: images.filter(image => !image.complete || image.naturalWidth === 0)
      .map(image => image.alt),
    summary: document.querySelectorAll("#summary li").length,
    contents: document.querySelectorAll("nav.contents a").length,
    sections: sections.filter(section => section.id !== "summary").length,
    empty: empty.map(section => section.id),
    wide: wide.map(element => element.tagName + "." + element.className).slice(0, 5),
    grid: getComputedStyle(document.querySelector(".figures") || root).display,
  };
  const out = document.createElement("pre");
  out.id = "layout-probe";
  out.textContent = JSON.stringify(result);
  document.body.append(out);
});
</script>"""


def chromium(*arguments: str, profile: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}",
         *arguments], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def measure(report: Path, folder: Path) -> dict[str, object]:
    """What the probe measured on `report` at WIDTH pixels."""
    html = report.read_text(encoding="utf-8")
    assert CONTENT_SECURITY_POLICY in html
    probed = folder / "probed.html"
    probed.write_text(html.replace(
        CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY + "; script-src 'unsafe-inline'"
    ).replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = chromium(f"--window-size={WIDTH},900", "--virtual-time-budget=5000", "--dump-dom",
                   probed.as_uri(), profile=folder / "profile").stdout
    found = re.search(r'<pre id="layout-probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe found no loaded page: " + dom[-500:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")
                      .replace("&lt;", "<").replace("&gt;", ">"))


def screenshot(report: Path, height: int, name: str, folder: Path) -> Path:
    """The whole page (up to SCREENSHOT_HEIGHT_LIMIT) as the report itself renders it."""
    target = Path(os.environ.get("THUMB_SCREENSHOT_DIR") or folder)
    target.mkdir(parents=True, exist_ok=True)
    path = target / name
    chromium(f"--window-size={WIDTH},{min(height, SCREENSHOT_HEIGHT_LIMIT)}",
             "--virtual-time-budget=5000", f"--screenshot={path}", report.as_uri(),
             profile=folder / "profile")
    assert path.stat().st_size > 10_000  # a page was drawn, not an empty frame
    return path


def check_layout(report: Path, folder: Path, screenshot_name: str) -> dict[str, object]:
    layout = measure(report, folder)
    assert layout["viewport"] == WIDTH
    assert layout["scrollWidth"] <= WIDTH, layout  # no horizontal overflow
    assert layout["wide"] == [], layout  # nothing runs past the right edge
    assert layout["images"] >= 1 and layout["unloaded"] == [], layout  # every figure loaded
    assert layout["grid"] == "grid"  # the figures side by side
    assert layout["summary"] >= 3, layout  # scope, ranking, metrics at least
    assert layout["contents"] == layout["sections"] >= 5, layout  # each one listed
    assert layout["empty"] == [], layout  # a section is there to show something
    screenshot(report, int(layout["height"]), screenshot_name, folder)
    return layout


@pytest.mark.slow
def test_the_sample_projects_report_lays_out_at_1280_pixels(tmp_path):
    engine = open_database(tmp_path / "sample.db")
    import_captions(engine, SAMPLE_CSV, actor="t")
    import_captions(engine, SAMPLE_CSV.parent / "example_ratings.csv", actor="t")
    compute_metrics(engine, ["bleu", "rouge-l", "cider-d"], MetricOptions(tokenizer="ptb-python"))
    report = build_report(engine, bootstrap=200, seed=0)
    path = write_report(report, tmp_path / "report", "html")
    layout = check_layout(path, tmp_path, "report-sample.png")
    assert layout["images"] == 1 + len(report.signatures)  # Figure 2 and a scatter each


@pytest.mark.slow
@needs_anchors
def test_the_thumb_release_report_lays_out_at_1280_pixels(tmp_path):
    engine = open_database(tmp_path / "thumb.db")
    import_thumb(engine, THUMB_JSONL, THUMB_REFS, actor="t")
    compute_metrics(engine, ["bleu", "cider-d"], MetricOptions(tokenizer="ptb-python"))
    report = build_report(engine, bootstrap=100, seed=0)
    path = write_report(report, tmp_path / "report", "html")
    html = path.read_text(encoding="utf-8")
    assert "VinVL-large" in html and "Human 4.56" in html  # Table 2's Total, in the summary
    check_layout(path, tmp_path, "report-thumb-1.0.png")
