"""Toolchains (registry to come)."""
