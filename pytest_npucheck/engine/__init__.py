"""The check of one model and the decisions of a run, without pytest.

- ``settings``: the run's options and ini keys resolved once into a frozen :class:`Settings`; a
  marked test's :class:`CheckSpec`.
- ``context``: the frozen :class:`RunContext` of one check (settings, spec, paths, loaded files).
- ``entry``: the typed per-test :class:`CheckEntry` and its JSON form (the report's ``tests[]``).
- ``model_check``: export, verdicts, fixes, baseline gate, deployment budgets (``run_check``).
- ``numeric_steps``: PyTorch vs ONNX Runtime, precision emulation, goldens, oracles.
- ``torch_values``: tensors <-> NumPy for the numeric steps.
- ``run_decisions``: stale baseline and budget entries, the budgets' ratchet, the run's exit status,
  as functions over the entries' JSON form (the same for one run and for merged shards).

The plugin (``plugin.py``) and the controller's reporter (``reporter.py``) are the pytest glue.
"""
