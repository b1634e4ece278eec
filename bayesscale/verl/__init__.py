"""verl sweeps: plan them, launch them on Ray, read the finished runs back, count the axes.

The loop, one module per concept (they import only ``bayesscale.names`` and
``bayesscale.data.observations`` from the package; no PyMC; Ray only inside ``launch``):

* ``pool``      read and check a task pool (one row per task-environment cell)
* ``sweep``     the sweep spec (TOML): anchors, grid, seeds, algorithms, models, hold-out
* ``plan``      the plan: held-out split, nested grid points, training-signal alignment,
                the sweep directory (written atomically)
* ``manifest``  the sweep's run table, rewritten atomically
* ``commands``  each run's verl command (Hydra overrides, per-attempt log path)
* ``launch``    Ray job API (queued against free GPUs) or local runs; stop and resume
* ``logs``      verl's file-logger JSONL, quirks included
* ``ingest``    finished runs -> observation rows (successes/trials, compute), merged by run id
* ``count``     distinct tasks (near-duplicates merged), environments (structural
                signatures) and worlds of a pool
* ``embed``     all-MiniLM-L6-v2 (any BERT sentence model) in NumPy, for ``count``

See docs/verl.md.
"""
