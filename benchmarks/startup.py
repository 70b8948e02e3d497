"""Nothing to do costs nothing: `thumb --help`, `thumb status` and a `thumb metrics compute`
that finds every score stored, each as a fresh process, in seconds over the interpreter's
own start-up (target 1 s; best of 3). Also lists the heavy libraries each one imports.
Prints figures next to targets; asserts nothing."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.report_speed import project  # noqa: E402
from benchmarks.table import Table, best_of, installed_environment, seconds  # noqa: E402

HEAVY = ("torch", "transformers", "nltk", "rouge_score", "bert_score", "spacy", "scipy",
         "pandas", "matplotlib", "sacrebleu", "PIL", "textual", "sqlalchemy", "numpy")
PROBE = ("import sys; sys.argv = ['thumb', *sys.argv[1:]]; "
         "from thumb_tui.cli import app\ntry:\n    app()\nexcept SystemExit:\n    pass\n"
         "print('\\nloaded:', ' '.join(sorted(m for m in {heavy} if m in sys.modules)), "
         "file=sys.stderr)")


def run(arguments: list[str]) -> tuple[float, str]:
    """One fresh `thumb` process: the CPU seconds it used (what an idle machine's wall time
    would be, whatever the load) and the heavy libraries it imported."""
    env = installed_environment()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *arguments],
                          capture_output=True, text=True, env=env, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, done.stderr.rsplit("loaded:", 1)[-1].strip() or "none"


def _cpu_of_pass() -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path, source = project(Path(tmp))
        table = Table("startup", f"{source} with BLEU, ROUGE-L and CIDEr-D stored; fresh "
                                 f"processes, best of 3; {os.cpu_count()} CPUs shared with "
                                 "other developers")
        python, _ = best_of(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))
        python_cpu = min(_cpu_of_pass() for _ in range(3))
        table.add("interpreter start-up (`python -c pass`)", seconds(python),
                  note=f"CPU {python_cpu:.2f} s")
        for label, arguments in (
            ("`thumb --help`", ["--help"]),
            ("`thumb status`", ["--db", str(path), "status"]),
            ("`thumb metrics compute`, every score stored",
             ["--db", str(path), "metrics", "compute"]),
        ):
            took, (_, loaded) = best_of(lambda arguments=arguments: run(arguments))
            cpu = min(run(arguments)[0] for _ in range(3)) - python_cpu
            took = took - python
            table.add(f"{label}, over start-up", f"{seconds(took)} wall, {cpu:.2f} s CPU",
                      target="<= 1 s", met=took <= 1,
                      note=f"heavy libraries imported: {loaded}; CPU time is what an idle "
                           "machine's wall time would be")
        table.save()


if __name__ == "__main__":
    main()
