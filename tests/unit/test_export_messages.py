"""How an exporter's missing optional package is reported (export.py imports no torch at import)."""

from __future__ import annotations

from pytest_npucheck import export


def _chained(inner: BaseException) -> RuntimeError:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise RuntimeError("Failed to export the model with torch.export") from exc
    except RuntimeError as outer:
        return outer


def test_missing_onnxscript_anywhere_in_the_chain_is_one_sentence_with_the_install_command():
    exc = _chained(ModuleNotFoundError("No module named 'onnxscript'", name="onnxscript"))
    text = export._error_message("dynamo", "models.CleanCNN", exc, "some exporter output\n")
    assert text == export.missing_package_message("dynamo", "onnxscript")
    assert "\n" not in text
    assert 'pip install "pytest-npucheck[torch]"' in text and 'exporter="torchscript"' in text


def test_submodule_of_a_missing_package_names_the_package():
    exc = _chained(ModuleNotFoundError("No module named 'onnx_ir.passes'", name="onnx_ir.passes"))
    assert "'onnx_ir'" in export._error_message("dynamo", "M", exc, "")


def test_other_missing_modules_keep_the_exporters_message():
    exc = _chained(ModuleNotFoundError("No module named 'tabulate'", name="tabulate"))
    text = export._error_message("dynamo", "M", exc, "")
    assert text.startswith("dynamo exporter failed to export M: Failed to export the model")
    assert "tabulate" in text and "pytest-npucheck[torch]" not in text
    # the torchscript exporter needs no ONNX Script: its failures are never rewritten
    exc = _chained(ModuleNotFoundError("No module named 'onnxscript'", name="onnxscript"))
    assert export._error_message("torchscript", "M", exc, "").startswith("torchscript exporter failed")


def test_missing_exporter_package_is_found_without_importing_it(monkeypatch):
    import sys

    assert export._missing_exporter_package("torchscript") is None
    monkeypatch.setitem(sys.modules, "onnx_ir", None)
    monkeypatch.setattr(export, "EXPORTER_PACKAGES", {"dynamo": ("onnx_ir",)})
    assert export._missing_exporter_package("dynamo") == "onnx_ir"
