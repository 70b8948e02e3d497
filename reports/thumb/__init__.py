"""The THUMB report (`thumb report`): its tables (`tables.build_report`, the one builder) and
what reads a finished report: the summary, figures and the Markdown, HTML, JSON, LaTeX and
terminal renderers, which also render the sections it shares with the judgment, agreement
and BISON reports."""
