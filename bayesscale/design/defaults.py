"""The defaults of ``bayesscale next``, declared once and light to import: the command line's
``--help`` reads them without loading the design's numerics.

>>> TARGET_DECISION in TARGETS
True
"""

from __future__ import annotations

from typing import Final

TARGET_DECISION: Final = "decision"  # value: the expected value of perfect information at B
TARGET_EXPONENTS: Final = "exponents"  # value: the population exponents' posterior variance
TARGETS: Final = (TARGET_DECISION, TARGET_EXPONENTS)
DEFAULT_RUNS: Final = 8  # runs per batch
DEFAULT_SIMULATIONS: Final = 128  # outer draws M of the preposterior analysis
DEFAULT_MAX_DRAWS: Final = 1000  # posterior draws per chain reweighted
DEFAULT_ACTIONS: Final = 64  # size of the finite action set of the decision target
DEFAULT_BEYOND: Final = 4.0  # candidates up to this many times the largest swept value
# Under a spend cap, batches that start with each of this many first runs worth most (by value
# and by value per cost) are tried besides the two greedy batches (partial enumeration).
DEFAULT_FIRST_PICKS: Final = 3
# Where a one-axis candidate holds the other axes: "paper", the paper's anchors (256 / 10,240 /
# 8) unless the setting's sweep lies wholly above one; "swept", the paper's anchors only inside
# the swept range, else the largest swept size (the default until stop 26).
ANCHORS_PAPER: Final = "paper"
ANCHORS_SWEPT: Final = "swept"
ANCHOR_RULES: Final = (ANCHORS_PAPER, ANCHORS_SWEPT)
DEFAULT_STEP: Final = 2.0  # candidate sizes this factor apart
DEFAULT_TRIALS: Final = 1000  # held-out tasks a run is evaluated on
# Below this median importance-weight ESS a run's value is rough: the batch stops before such a
# run (the draws cannot value it; refit after the batch and ask again), except as its first run.
DEFAULT_MIN_ESS: Final = 40.0
