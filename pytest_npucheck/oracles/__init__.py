"""Optional ground truth ("oracles"): a model built and run with its target's real toolchain.

:mod:`.oracle` checks one model on one target through the toolchain's ``oracle`` hook
(:mod:`pytest_npucheck.toolchains.registry`); :mod:`.compare` compares real placement with the
static verdicts; :mod:`.simulate` holds what every toolchain's worker protocol shares;
:mod:`.zoo_score` scores a model zoo against recorded compiler results. Nothing here is needed
for the static check; an oracle degrades to "unavailable" when its toolchain is not installed.
"""
