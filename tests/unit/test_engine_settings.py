"""engine/settings.py: options and ini keys resolved once into frozen Settings; bad values are
usage errors naming the option or ini key (the plugin shows them as pytest usage errors)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_npucheck import __version__
from pytest_npucheck.engine import settings as st
from pytest_npucheck.errors import UsageError

INI_DEFAULTS = {"npu_targets": [], "npu_model_fixture": "model", "npu_inputs_fixture": "example_inputs",
                "npu_exporter": "dynamo", "npu_opset": "", "npu_dynamic_axes": "", "npu_tables": [],
                "npu_baseline": [], "npu_baseline_strict": False, "npu_numerics": True, "npu_golden": False,
                "npu_golden_dir": [], "npu_golden_max_mb": "", "npu_budgets": [], "npu_release": "",
                "npu_oracle": "off", "npu_timeout": "", "npu_memory_limit": "", "npu_keep_onnx": "",
                "npu_export_cache_dir": "", "npu_isolate": True, "npu_seed_rng": True,
                "npu_worker_fast_exit": True}


def resolve(tmp_path: Path, options=None, ini=None) -> st.Settings:
    opts, inis = dict(options or {}), {**INI_DEFAULTS, **(ini or {})}

    def ini_value(name):
        value = inis[name]
        if isinstance(value, Exception):
            raise value
        return value

    return st.resolve(lambda name: opts.get(name), ini_value, invocation_dir=tmp_path, rootpath=tmp_path,
                      inipath=None, is_worker=False)


def test_defaults_are_frozen_values(tmp_path):
    s = resolve(tmp_path)
    assert s.baseline_path == tmp_path / "npucheck-baseline.json" and s.golden_root == tmp_path / "npu_goldens"
    assert s.oracle_mode == "off" and s.budgets_path is None and s.exporter == "dynamo" and s.opset is None
    assert s.release == __version__  # no pyproject.toml in the rootdir: the plugin's version
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.strict = True  # type: ignore[misc]


def test_options_win_over_ini_keys(tmp_path):
    s = resolve(tmp_path, {"npu_baseline_strict": True, "npu_target": ["rknn"], "npu_oracle": "strict",
                           "npu_golden_max_mb": "2", "npu_report": ["json:r.json"]},
                {"npu_targets": ["qnn"], "npu_opset": "17", "npu_oracle": "report"})
    assert s.strict and s.default_targets == ("rknn",) and s.oracle_mode == "strict"
    assert s.golden_max_bytes == 2 << 20 and s.opset == 17 and s.reports == (("json:r.json", "json", "r.json"),)
    assert s.default_spec().targets == ("rknn",)


def test_export_cache_dir_from_the_ini_key_else_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(st.EXPORT_CACHE_ENV, raising=False)
    assert resolve(tmp_path).export_cache_dir is None  # pytest's cache directory
    monkeypatch.setenv(st.EXPORT_CACHE_ENV, "ci-cache/exports")
    assert resolve(tmp_path).export_cache_dir == tmp_path / "ci-cache" / "exports"
    s = resolve(tmp_path, ini={"npu_export_cache_dir": "from-ini"})  # no ini file: relative to the rootdir
    assert s.export_cache_dir == tmp_path / "from-ini" and s.export_cache
    assert resolve(tmp_path, {"npu_no_export_cache": True}).export_cache is False


@pytest.mark.parametrize("options, ini, message", [
    ({}, {"npu_oracle": "loud"}, "ini key npu_oracle: oracle mode 'loud': expected one of off, report, strict"),
    ({"npu_golden_max_mb": "0"}, {}, "--npu-golden-max-mb: expected a whole number of MiB greater than 0, got '0'"),
    ({}, {"npu_golden_max_mb": "x"}, "ini key npu_golden_max_mb: expected a whole number of MiB greater than 0"),
    ({"npu_report": ["pdf:x.pdf"]}, {}, "--npu-report='pdf:x.pdf': expected FORMAT:PATH with FORMAT one of json, md, html"),
    ({}, {"npu_opset": "99"}, "ini key npu_opset: opset=99"),
    ({}, {"npu_dynamic_axes": "{"}, "ini key npu_dynamic_axes: invalid JSON"),
    ({}, {"npu_memory_limit": "lots"}, "npu_memory_limit: expected a whole number of MiB, got 'lots'"),
    ({}, {"npu_numerics": ValueError("invalid truth value 'nah'")}, "ini key npu_numerics: invalid truth value 'nah'"),
])
def test_a_bad_value_is_a_usage_error_naming_it(tmp_path, options, ini, message):
    with pytest.raises(UsageError) as exc:
        resolve(tmp_path, options, ini)
    assert message in str(exc.value)


def test_a_release_budgets_cannot_match_names_where_it_came_from(tmp_path):
    with pytest.raises(UsageError, match=r"--npu-release: .*budgets need a release such as 1.2.0"):
        resolve(tmp_path, {"npu_release": "abc"}).checked_release()
    assert resolve(tmp_path, {"npu_release": "1.2.0"}).checked_release() == "1.2.0"


def test_marker_spec_and_report_targets(tmp_path):
    s = resolve(tmp_path, {"npu_report": ["json:npucheck-baseline.json"]}, {"npu_targets": ["toy"]})
    spec = st.spec_for("t.py::a", "npu_deployable", ["toy@1.0"], {"opset": 17}, s)
    assert spec.targets == ("toy@1.0",) and spec.opset == 17 and spec.exporter == "dynamo"
    with pytest.raises(UsageError, match="give targets positionally or as targets=, not both"):
        st.spec_for("t.py::a", "npu_deployable", ["toy"], {"targets": ["toy"]}, s)
    with pytest.raises(UsageError, match="is the baseline file; the report would replace it"):
        st.check_outputs(s)
