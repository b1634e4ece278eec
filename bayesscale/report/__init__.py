"""What goes in a paper: the text summary, LaTeX tables, figures and the report folder.

* :mod:`~bayesscale.report.summary` — the text summary of a law fit;
* :mod:`~bayesscale.report.tables` — LaTeX and Markdown tables;
* :mod:`~bayesscale.report.figures` — the figures, with uncertainty bands;
* :mod:`~bayesscale.report.folder` — the report folder, written atomically;
* :mod:`~bayesscale.report.build` — the report, from observations to every output.
"""
