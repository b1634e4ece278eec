"""The budget recipe under uncertainty: the KKT allocation over a law fit posterior.

draws of the law (:mod:`~bayesscale.recipe.draws`) -> the recipe per draw and the decision
(:mod:`~bayesscale.recipe.solve`) -> summaries and JSON (:mod:`~bayesscale.recipe.output`);
iso-budget curves (:mod:`~bayesscale.recipe.iso_budget`), the recipe in the compute-optimal frame
(:mod:`~bayesscale.recipe.compute`) and a hand-made fit for examples
(:mod:`~bayesscale.recipe.synthetic`).
"""
