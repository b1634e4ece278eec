"""The budget recipe under uncertainty: the KKT allocation over a law fit posterior.

the law's draws (:mod:`bayesscale.law.posterior`) and the recipe's inputs
(:mod:`~bayesscale.recipe.draws`) -> the recipe per draw and the decision
(:mod:`~bayesscale.recipe.solve`), bounded to the data where it leaves it
(:mod:`~bayesscale.recipe.vouched`) -> summaries and JSON (:mod:`~bayesscale.recipe.output`)
-> the result with every note it carries (:mod:`~bayesscale.recipe.result`,
:mod:`~bayesscale.recipe.notes`); iso-budget curves (:mod:`~bayesscale.recipe.iso_budget`),
the recipe in the compute-optimal frame (:mod:`~bayesscale.recipe.compute`) and a hand-made fit
for examples (:mod:`~bayesscale.recipe.synthetic`).
"""
