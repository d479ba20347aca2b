"""Values between PyTorch and NumPy for the numeric steps: the tensor leaves of nested inputs and
outputs in the exporters' order, copies that never share memory, the live PyTorch outputs by ONNX
output name, and the eval-mode guard of an export. torch is imported inside the functions that need it.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence


def leaves(x: Any) -> list[Any]:
    """Tensor leaves of nested inputs/outputs in the exporters' flattening order (None and scalars are skipped)."""
    out: list[Any] = []

    def walk(v: Any) -> None:
        if isinstance(v, (list, tuple)):
            for w in v:
                walk(w)
        elif isinstance(v, Mapping):
            for w in v.values():
                walk(w)
        elif hasattr(v, "detach") and hasattr(v, "shape"):
            out.append(v)

    walk(x)
    return out


def rebuild(x: Any, arrays: list[Any]) -> Any:
    """``x`` with its tensor leaves replaced, in order, by tensors made from ``arrays``."""
    import torch

    it = iter(arrays)

    def walk(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(walk(w) for w in v)
        if isinstance(v, list):
            return [walk(w) for w in v]
        if isinstance(v, Mapping):
            return {k: walk(w) for k, w in v.items()}
        if hasattr(v, "detach") and hasattr(v, "shape"):
            return torch.from_numpy(next(it).copy()).to(v.dtype)
        return v

    return walk(x)


def torch_outputs(model: Any, example_inputs: Any, names: Sequence[str]) -> dict[str, Any]:
    """The live PyTorch outputs (eval mode, no grad) by ONNX output name; ValueError if they do not line up."""
    return torch_outputs_named(model, example_inputs, names)[0]


def torch_outputs_named(model: Any, example_inputs: Any, names: Sequence[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The live PyTorch outputs by ONNX output name, and the model's own name of each output that has
    one (a dict key or namedtuple field, dotted when nested: ``{"onnx name": "heads.labels"}``)."""
    import torch

    from ..export import _split_inputs

    # on copies: a model that changes its inputs in place must not change the test's tensors (nor,
    # through shared memory, the feeds ONNX Runtime gets next)
    args, kwargs = _split_inputs(rebuild(example_inputs, input_arrays(example_inputs)))
    with eval_mode(model), torch.no_grad():
        out = model(*args, **kwargs)
    tensors = leaves(out)
    if len(tensors) != len(names):
        raise ValueError(f"the model returns {len(tensors)} tensor(s) but the ONNX graph has {len(names)} output(s)")
    own = leaf_names(out)
    return ({n: array(t, f"output {n!r}") for n, t in zip(names, tensors)},
            {n: own[k] for k, n in enumerate(names) if own[k] and own[k] != n})


class NoNumerics(Exception):
    """The numbers of this model cannot be checked on ONNX Runtime CPU (the message says why)."""


def array(tensor: Any, what: str) -> Any:
    """A NumPy copy of a tensor (never sharing its memory); bfloat16, which NumPy and ONNX Runtime's
    CPU kernels lack, is NoNumerics."""
    if str(tensor.dtype) == "torch.bfloat16":
        raise NoNumerics(f"the model's {what} is bfloat16: ONNX Runtime's CPU provider, which runs the numeric "
                          "checks, has no bfloat16 kernels for models such as this one (and NumPy no bfloat16 "
                          "type), so its numbers cannot be checked here; check a float32 copy of the model for "
                          "the numbers, or switch the numeric checks off for this test (numerics=False). The "
                          "deployability verdict above does not depend on them")
    return tensor.detach().cpu().numpy().copy()


def input_arrays(example_inputs: Any) -> list[Any]:
    """The tensor leaves of the example inputs as NumPy copies, taken before any run of the model."""
    return [array(t, f"input {k}") for k, t in enumerate(leaves(example_inputs))]


def leaf_names(x: Any) -> list[Optional[str]]:
    """Per tensor leaf (the order of :func:`leaves`), its path of dict keys and namedtuple fields
    (positions of plain tuples and lists in brackets); None when no key or field is on the path."""
    out: list[Optional[str]] = []

    def walk(v: Any, path: str, named: bool) -> None:
        if isinstance(v, Mapping):
            for k, w in v.items():
                walk(w, f"{path}.{k}" if path else str(k), True)
        elif isinstance(v, tuple) and hasattr(v, "_fields"):
            for f, w in zip(v._fields, v):
                walk(w, f"{path}.{f}" if path else f, True)
        elif isinstance(v, (list, tuple)):
            for k, w in enumerate(v):
                walk(w, f"{path}[{k}]", named)
        elif hasattr(v, "detach") and hasattr(v, "shape"):
            out.append(path if named else None)

    walk(x, "", False)
    return out


class eval_mode:
    """Export as the model deploys (eval mode) and give it back as it was."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.flags: list[tuple[Any, bool]] = []

    def __enter__(self) -> None:
        modules = getattr(self.model, "modules", None)
        if callable(modules):
            self.flags = [(m, m.training) for m in modules()]
            self.model.eval()

    def __exit__(self, *exc: Any) -> None:
        for m, flag in self.flags:
            m.training = flag

