"""Toolchains as plug-ins: one registry (:mod:`.registry`) of every toolchain the checker knows.

* ``rknn/``, ``qnn/``: the built-in toolchains that run here: placement adapter (``adapter.py``),
  oracle hook (``simulate.py``), workers run in the toolchain's own venv (``_*_worker.py``, with
  ``_worker_io.py`` one level up), probe runner (``probe.py``), table builder (``table.py``) and
  their registration (``toolchain.py``).
* :mod:`.documented`: SNPE and CANN, whose tables come from vendor documentation (no oracle).
* :mod:`.venv`: finding a toolchain's venv python.

Another package adds a toolchain through the entry-point group ``pytest_npucheck.toolchains``
(see :mod:`.registry`). Importing this package imports nothing else.
"""
