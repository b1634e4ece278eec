"""What goes in a paper: LaTeX tables, figures, the recipe as text and the report folder.

* :mod:`~bayesscale.report.recipe_text` — the recipe as text;
* :mod:`~bayesscale.report.tables` — LaTeX and Markdown tables;
* :mod:`~bayesscale.report.figures` — the figures, with uncertainty bands;
* :mod:`~bayesscale.report.folder` — the report folder, written atomically;
* :mod:`~bayesscale.report.build` — the report, from observations to every output.
"""
