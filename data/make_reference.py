"""Generate the bundled reference dataset from a declared truth (run from the repo root).

    python data/make_reference.py

Writes data/reference/{truth.json, observations.csv, heldout.csv}. Everything is
seeded: re-running reproduces the files byte for byte. The truth is calibrated to the
values the paper reports (PAPER.md sections 1-4); it is simulated, not the paper's data.
"""

from __future__ import annotations

from pathlib import Path

from bayesscale import names
from bayesscale.data.simulate import (
    REFERENCE_TRUTH_SEED,
    heldout_design,
    paper_truth,
    per_axis_design,
    simulate,
)

OUT = Path(__file__).resolve().parent / "reference"
TRUTH_SEED = REFERENCE_TRUTH_SEED
OBSERVATION_SEED = 1
HELDOUT_SEED = 2
COLUMNS = [
    names.MODEL,
    names.ALGORITHM,
    names.DOMAIN,
    names.PARAMS_B,
    names.N_ENVS,
    names.N_TASKS,
    names.ROLLOUTS,
    names.REWARD,
    names.SEED,
    names.SUCCESSES,
    names.TRIALS,
]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    truth = paper_truth(seed=TRUTH_SEED)
    truth.to_json(OUT / "truth.json")
    observations = simulate(truth, per_axis_design(truth), seed=OBSERVATION_SEED)
    observations[COLUMNS].to_csv(OUT / "observations.csv", index=False)
    heldout = simulate(truth, heldout_design(truth), seed=HELDOUT_SEED)
    heldout[COLUMNS].to_csv(OUT / "heldout.csv", index=False)
    print(f"wrote {len(observations)} observations and {len(heldout)} held-out rows to {OUT}")


if __name__ == "__main__":
    main()
