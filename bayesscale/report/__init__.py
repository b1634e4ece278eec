"""What goes in a paper, rendered: LaTeX tables, figures, the recipe as text, the report as
Markdown and the report folder (the report's pipeline is :mod:`bayesscale.pipeline.report`).

* :mod:`~bayesscale.report.recipe_text` — the recipe as text;
* :mod:`~bayesscale.report.tables` — LaTeX and Markdown tables;
* :mod:`~bayesscale.report.figures` — the figures, with uncertainty bands;
* :mod:`~bayesscale.report.markdown` — the report's Markdown sections and files;
* :mod:`~bayesscale.report.folder` — the report folder, written atomically.
"""
