"""Reports: the layer that joins storage and metrics. It scores a project's captions
(load from storage, compute in metrics, store back), builds the report tables (agreement,
the THUMB paper's analyses, BISON) and renders them as Markdown, HTML, JSON or terminal
text: one module per flow at the top, the THUMB report and its renderers in `thumb/`.
Nothing below it imports it; the command line and the screens sit on top."""
