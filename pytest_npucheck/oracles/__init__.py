"""Optional ground-truth backends ("oracles"): real vendor toolchains driven in subprocesses.

Nothing here is needed for the static check; each oracle degrades to "unavailable" when its
toolchain is not installed.
"""
