"""Reading an ONNX file: checks that name the file, and a read that leaves the weights out.

``load_model_proto`` refuses what is not an ONNX model (a Git LFS pointer, an empty file, a graph
without nodes or outputs) and untrusted external-data references; with ``weights=False`` it parses a
copy of the file without the values of large initializers, cut out of the protobuf wire format
here (``_without_weights``), so that neither the parser nor shape inference copies the weights.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterator, Optional

from ..errors import ModelError
from .facts import _DTYPE_NAMES, _RAW_ITEMSIZE, SMALL_CONSTANT


def _check_raw_size(path: object, tensor: Any, raw: int) -> None:
    """ModelError when ``raw`` bytes of raw_data do not hold the elements the dims and data type of the
    initializer ``tensor`` say: ONNX Runtime refuses to load such a model, and numpy cannot read it."""
    size = _RAW_ITEMSIZE.get(tensor.data_type)
    if size is None:
        return
    dims = list(tensor.dims)
    if any(d < 0 for d in dims):
        raise ModelError(f"{path}: initializer '{tensor.name}' has a negative dim in its dims {dims} "
                         f"({raw} bytes of raw_data)")
    need = math.prod(dims) * size
    if raw != need:
        raise ModelError(f"{path}: initializer '{tensor.name}': raw_data size ({raw} bytes) does not match its "
                         f"dims {dims} of {_DTYPE_NAMES[tensor.data_type]} ({need} bytes); ONNX Runtime "
                         f"refuses to load it")


_LFS = b"version https://git-lfs.github.com/spec/"


_LOCATION = b"location"  # the key of StringStringEntryProto that names an external data file


def load_model_proto(path: Path, weights: bool = True, keep: Optional[list[Any]] = None,
                     light: Optional[bytes] = None) -> Any:
    """Read an ONNX file without its external data; every failure names the file.

    ``weights=False`` also leaves out the values of initializers of more than SMALL_CONSTANT
    elements stored in the file (``_without_weights``): enough for graph facts, not for running
    or rewriting the model. ``keep``: gets the attributes of each main-graph node as a tuple, read
    by the external-data check (``safety.check_external_data``) and reused by the facts; and, when
    the weights were left out, the serialized model without them (``keep.serialized``) for shape
    inference, which would otherwise serialize the parsed model again. ``light``: with
    ``weights=False``, what ``read_without_weights`` returned for this file, read by the process
    that started this one (``check._isolated_facts``): it is parsed instead of the file's bytes
    being cut again (the same bytes, so the same model; every other check runs as without it).
    """
    import onnx  # lazy: heavy
    from google.protobuf.message import DecodeError

    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise ModelError(f"{path}: cannot read model file: {exc.strerror or exc}") from None
    if not path.is_file():
        raise ModelError(f"{path}: not a regular file")
    if st.st_size == 0:
        raise ModelError(f"{path}: empty file, not an ONNX model")
    with open(path, "rb") as fh:
        head = fh.read(64)
    if head.startswith(_LFS):
        raise ModelError(f"{path}: is a Git LFS pointer, not the model (run `git lfs pull`)")
    try:
        model = None
        if not weights:
            model = _load_without_weights(path, onnx, keep, light)
        if model is None:
            model = onnx.load(os.fspath(path), load_external_data=False)
    except ModelError:  # a bad initializer found while leaving out the weights
        raise
    except (DecodeError, RuntimeError, ValueError, OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    except Exception as exc:  # protobuf raises assorted errors on random bytes
        raise ModelError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    if not model.HasField("graph"):
        raise ModelError(f"{path}: ONNX file has no graph")
    if len(model.graph.node) == 0:
        raise ModelError(f"{path}: ONNX graph '{model.graph.name}' has no nodes: nothing to check")
    if len(model.graph.output) == 0:
        raise ModelError(f"{path}: ONNX graph '{model.graph.name}' declares no outputs")
    if isinstance(keep, Kept) and keep.serialized is not None and not keep.references:
        return model  # read without its weights, and no tensor of the file can name an external file
    from ..safety import check_external_data

    check_external_data(model, path, keep=keep)  # untrusted references are refused before anything reads them
    return model


def _load_without_weights(path: Path, onnx: Any, keep: Optional[list[Any]] = None,
                          light: Optional[bytes] = None) -> Any:
    """The model without its large initializer values, or None to read it the ordinary way.

    The file is mapped, not read: the pages that hold the weights are never touched (CPU time of
    reading bert_9k's 39 MB: 19 ms, against 63 ms to read and parse it whole and clear the values).
    ``light``: those bytes, already cut (``read_without_weights``).
    """
    if light is None:
        light = read_without_weights(path, quiet=False)
    if light is None:
        return None
    if isinstance(keep, Kept):
        keep.serialized = light
        keep.references = _LOCATION in light
    return onnx.ModelProto.FromString(light)


# How many graph fields (nodes, initializers) the quiet cut scans before it gives up: it runs in the
# parent before the isolated child starts, so no timeout covers it, and a crafted file of tiny fields
# would hold the scan for ~0.5 us a field (a 2 GB file of empty nodes: minutes). 4 million is ~2 s
# and more fields than any model of the zoos holds; beyond it the child cuts the file as before,
# under the isolation's timeout.
QUIET_FIELDS = 4_000_000


def read_without_weights(path: Path, quiet: bool = True) -> Optional[bytes]:
    """``_without_weights`` of the file at ``path`` (mapped, not read), or None when there is nothing
    to leave out or the file is read the ordinary way (malformed). ``quiet``: None also for a
    ModelError or a file that cannot be read (the caller asks ahead of the checks, which will say
    what is wrong: ``check._isolated_facts``, before it starts the child); None, without opening
    it, for what is not a regular file that holds bytes (opening a FIFO would wait for a writer:
    ``load_model_proto`` refuses it before it opens anything); and None for a graph of more than
    ``QUIET_FIELDS`` fields (no timeout covers this scan)."""
    return _read_cut(path, quiet, False)[0]


def read_ahead(path: Path) -> tuple[Optional[bytes], Optional[bytes]]:
    """(cut, ahead): ``read_without_weights(path)`` (quiet), and the bytes whose nodes are the nodes
    shape inference will read for this file: the cut when there is one, else the file's own bytes
    when the same scan found nothing to leave out (a model of small weights only: the child parses
    the file, whose nodes are those bytes' nodes), else None (the quiet cases of
    ``read_without_weights``: malformed, not a regular file, more than ``QUIET_FIELDS`` fields).

    ``check._isolated_facts`` reads the nodes of ``ahead`` while the isolated child infers
    (``build.nodes_ahead``); only ``cut`` goes to the child (``load_model_proto``'s ``light``)."""
    return _read_cut(path, True, True)


def _read_cut(path: Path, quiet: bool, whole: bool) -> tuple[Optional[bytes], Optional[bytes]]:
    """``read_ahead``'s pair; ``whole`` False: the file's own bytes are not copied (None)."""
    import mmap
    import stat

    try:
        if quiet:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
                return None, None
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            try:
                light = _without_weights(buf, path, QUIET_FIELDS if quiet else None)
            except (ValueError, IndexError):
                return None, None
            if light is not None:
                return light, light
            return None, buf[:] if whole else None
    except Exception:  # noqa: BLE001 - see quiet
        if quiet:
            return None, None
        raise


class Kept(list):  # type: ignore[type-arg]
    """What ``load_model_proto(keep=Kept())`` hands on to ``facts_from_model``: the attributes of each
    main-graph node (the list itself) and the serialized model without its weights (``serialized``,
    None when the file was read whole)."""

    serialized: Optional[bytes] = None
    # Whether the bytes read (``serialized``) hold b"location". ONNX and ONNX Runtime read a tensor's
    # external data from the file its "location" entry names and refuse one without it; a protobuf
    # string is stored verbatim, so a file without those bytes has no reference for anything to
    # follow, and the external-data check (which reads every attribute of every node) is skipped.
    # The bytes left out are the values of large initializers: raw data, never a field.
    references: bool = True


# -- reading a model without its weights ----------------------------------------------------------
# Field numbers of onnx.proto: ModelProto.graph, GraphProto.initializer, TensorProto.dims and the
# TensorProto fields that hold values.
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_DIMS, _TENSOR_DTYPE, _TENSOR_RAW, _TENSOR_LOCATION = 7, 5, 1, 2, 9, 14


_TENSOR_DATA = frozenset({4, 5, 6, 7, 9, 10, 11})  # float/int32/string/int64/raw/double/uint64 data


def _varint(buf: Any, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fields(buf: Any, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, start of the field, start and end of its value) of each field of a message."""
    pos = start
    while pos < end:
        key, vpos = _varint(buf, pos)
        wire = key & 7
        if wire == 2:
            length, vpos = _varint(buf, vpos)
            vend = vpos + length
        elif wire == 0:
            _, vend = _varint(buf, vpos)
        elif wire == 1:
            vend = vpos + 8
        elif wire == 5:
            vend = vpos + 4
        else:
            raise ValueError(f"wire type {wire}")
        if vend > end:
            raise ValueError("field runs past its message")
        yield key >> 3, pos, vpos, vend
        pos = vend


def _tensor_parts(buf: Any, start: int, end: int) -> tuple[int, list[Any], int, int]:
    """(element count, the fields that are not values, data type, length of raw_data or -1 when the
    tensor has none or its data is external) of the TensorProto in ``buf[start:end]``.

    ``_fields`` inlined, with the one-byte keys and lengths of nearly every field read directly;
    the fields kept are returned as runs of adjacent fields (one slice per run, not per field)."""
    numel = 1
    dtype = raw = 0
    external = False
    kept: list[Any] = []
    run = pos = start  # start of the current run of kept fields
    while pos < end:
        fstart = pos
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos)
        wire = key & 7
        if wire == 2:
            length = buf[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = _varint(buf, pos)
            vstart, vend = pos, pos + length
        elif wire == 0:
            vstart = pos
            vend = pos + 1 if buf[pos] < 0x80 else _varint(buf, pos)[1]
        elif wire == 1:
            vstart, vend = pos, pos + 8
        elif wire == 5:
            vstart, vend = pos, pos + 4
        else:
            raise ValueError(f"wire type {wire}")
        if vend > end:
            raise ValueError("field runs past its message")
        pos = vend
        num = key >> 3
        if num == _TENSOR_DIMS:
            if wire == 2:  # packed dims
                p = vstart
                while p < vend:
                    d, p = _varint(buf, p)
                    numel *= d
            else:
                numel *= _varint(buf, vstart)[0]
        elif num in _TENSOR_DATA:
            if num == _TENSOR_RAW:
                raw = vend - vstart
            if run < fstart:
                kept.append(buf[run:fstart])
            run = vend
        elif num == _TENSOR_DTYPE:
            dtype = _varint(buf, vstart)[0]
        elif num == _TENSOR_LOCATION:
            external = _varint(buf, vstart)[0] == 1  # TensorProto.EXTERNAL
    if run < end:
        kept.append(buf[run:end])
    return numel, kept, dtype, raw if raw and not external else -1


def _without_weights(buf: Any, path: object = "<memory>", max_fields: Optional[int] = None) -> Optional[bytes]:
    """The serialized model minus the values of main-graph initializers of more than SMALL_CONSTANT
    elements (their name, dtype and dims stay), or None when there is nothing to leave out. The raw
    data of each initializer left out must hold its dims x dtype, else ModelError (naming ``path``).

    Graph facts never use those values, and skipping them means neither the protobuf parser nor
    shape inference copies the weights (a 100 MB CNN: most of the time of a check). Malformed
    input raises ValueError or IndexError; the caller then reads the file the ordinary way.

    The scan stops at the first graph field numbered after the initializers (inputs, outputs,
    value_infos: most of the fields of a dynamo export) and copies the rest as it is. Protobuf writes
    a message's fields in number order, so no initializer follows; one that does in a file written
    otherwise keeps its values, which the facts do not read either (only the saving is lost).
    ``max_fields``: ValueError after that many graph fields (``read_without_weights``' quiet cut).
    """
    graphs = [(f, s, e) for num, f, s, e in _fields(buf, 0, len(buf)) if num == _MODEL_GRAPH]
    if len(graphs) != 1 or buf[graphs[0][0]] & 7 != 2:
        return None
    gfield, gstart, gend = graphs[0]
    graph: list[Any] = []
    kept = gstart  # start of the run of graph bytes copied as they are
    dropped = 0
    pos, least = gstart, 8 * SMALL_CONSTANT
    left = -1 if max_fields is None else max_fields  # fields the scan may still read (-1: no bound)
    while pos < gend:  # _fields(buf, gstart, gend), inlined: one pass over every node and initializer
        if not left:
            raise ValueError(f"more than {max_fields} graph fields")
        left -= 1
        fstart = pos
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos)
        if key >> 3 > _GRAPH_INITIALIZER:
            break  # the rest is copied as it is (see above)
        wire = key & 7
        if wire == 2:
            length = buf[pos]
            if length < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:  # two bytes: most nodes
                length = (length & 0x7F) | buf[pos + 1] << 7
                pos += 2
            else:
                length, pos = _varint(buf, pos)
            vstart, vend = pos, pos + length
        elif wire == 0:
            vstart = pos
            _, vend = _varint(buf, pos)
        elif wire == 1:
            vstart, vend = pos, pos + 8
        elif wire == 5:
            vstart, vend = pos, pos + 4
        else:
            raise ValueError(f"wire type {wire}")
        if vend > gend:
            raise ValueError("field runs past its message")
        pos = vend
        if key >> 3 != _GRAPH_INITIALIZER or vend - vstart < least:
            continue
        numel, tensor, dtype, raw = _tensor_parts(buf, vstart, vend)
        if numel <= SMALL_CONSTANT:
            continue  # values kept: _small_initializers checks their size
        body = b"".join(tensor)
        if raw >= 0 and dtype in _RAW_ITEMSIZE and raw != numel * _RAW_ITEMSIZE[dtype]:
            from onnx import TensorProto

            _check_raw_size(path, TensorProto.FromString(body), raw)  # the tensor without its values
        graph += [buf[kept:fstart], buf[fstart:vstart - len(_encode_varint(vend - vstart))],
                  _encode_varint(len(body)), body]
        dropped += vend - vstart - len(body)
        kept = vend
    if not dropped:
        return None
    graph.append(buf[kept:gend])
    head = buf[gfield:gstart - len(_encode_varint(gend - gstart))]
    size = sum(map(len, graph))  # the model's bytes in one join (not the graph's first, then the model's)
    return b"".join([buf[:gfield], head, _encode_varint(size)] + graph + [buf[gend:]])


def _read_nodes(graph: Any, attributes: Optional[list[tuple[Any, ...]]] = None) -> list[tuple[Any, ...]]:
    """(node, op_type, domain as written, inputs, outputs, attributes) of each node of ``graph``.

    ``attributes``: each node's attributes as a tuple, already read (by the external-data check);
    otherwise read here. Each is then read once: the protobuf objects of an attribute list cost
    more to make than what the facts do with them. Repeated fields are copied by a slice, which
    protobuf makes in C (``tuple(n.input)`` iterates the field in Python: 40 % slower)."""
    nodes = graph.node
    if attributes is None or len(attributes) != len(nodes):
        return [(n, n.op_type, n.domain, tuple(n.input[:]), tuple(n.output[:]), tuple(n.attribute[:])) for n in nodes]
    return [(n, n.op_type, n.domain, tuple(n.input[:]), tuple(n.output[:]), a) for n, a in zip(nodes, attributes)]


# -- the child's inferred model, its value_infos' types left serialized ---------------------------
_LITE_MODEL: list[Any] = []  # [the message class, or None when it could not be made]
_NODELESS_MODEL: list[Any] = []  # [the same with the main graph's nodes as bytes, or None]


def parse_types_serialized(serialized: Any, nodes: bool = True) -> Any:
    """``serialized`` (a ModelProto) parsed with the main graph's value_infos' ``type`` and its
    nodes' ``attribute`` left as the bytes of each TypeProto and AttributeProto: ``graph.value_info[i].type``
    is ``bytes``, ``graph.node[i].attribute`` a list of ``bytes``; every other field is onnx's own
    message, as ``onnx.load_from_string`` parses it (the nodes are read by ``_read_nodes_serialized``).

    Shape inference adds a value_info per node output (26,393 on ``encoder_26k``) and the facts read
    each one's name and the bytes of its type (to decode each distinct type once: a few hundred);
    a node's attributes are keyed by their bytes (the layers of a model repeat them). Parsed as
    messages, each is a wrapper object and a ``SerializeToString`` call; declared ``bytes``, it is
    the wire bytes as they are (a message field and a bytes field have the same encoding). Falls
    back to ``onnx.load_from_string`` when protobuf cannot make the message type. ``serialized``:
    bytes, or a buffer such as a memoryview (the parser copies what it keeps).

    ``nodes`` False: the main graph's nodes too are left as the bytes of each NodeProto
    (``graph.node[i]`` is ``bytes``), for a caller that has them read already
    (``build.from_inferred`` with the nodes read while the child inferred): 26,394 messages not made
    for ``encoder_26k`` (~4 ms of the ~6 ms parse)."""
    import onnx

    if not _LITE_MODEL:
        _LITE_MODEL.append(_lite_model_class(onnx))
    cls = _LITE_MODEL[0]
    if not nodes and cls is not None:
        if not _NODELESS_MODEL:
            _NODELESS_MODEL.append(_lite_model_class(onnx, nodes=False))
        cls = _NODELESS_MODEL[0] or cls
    if cls is None:
        return onnx.load_from_string(serialized if type(serialized) is bytes else bytes(serialized))
    return cls.FromString(serialized)


def is_types_serialized(model: Any) -> bool:
    """Whether ``model`` came from one of ``parse_types_serialized``'s message types."""
    return any(cls is not None and isinstance(model, cls) for cls in _LITE_MODEL + _NODELESS_MODEL)


def _lite_model_class(onnx: Any, nodes: bool = True) -> Any:
    """ModelProto, GraphProto, NodeProto and ValueInfoProto copied from onnx's descriptors into a file
    of their own, with ValueInfoProto.type and NodeProto.attribute ``bytes`` fields and the copies
    referring to each other (every other message field keeps onnx's type: a node's body graph, read
    from its AttributeProto, is onnx's GraphProto); None if protobuf refuses it. ``nodes`` False:
    GraphProto.node is a ``bytes`` field too (in a file and package of its own)."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        source = onnx.ModelProto.DESCRIPTOR.file
        whole = descriptor_pb2.FileDescriptorProto()
        source.CopyToProto(whole)
        package = "pytest_npucheck.lite" if nodes else "pytest_npucheck.lite_nodeless"
        lite = descriptor_pb2.FileDescriptorProto(name=("pytest_npucheck/onnx_types_serialized.proto" if nodes else
                                                        "pytest_npucheck/onnx_nodes_serialized.proto"),
                                                  package=package, syntax=whole.syntax or "proto2")
        lite.dependency.append(source.name)
        ours = {"NodeProto", "ValueInfoProto", "GraphProto", "ModelProto"}
        for message in whole.message_type:
            if message.name not in ours:
                continue
            copy = lite.message_type.add()
            copy.CopyFrom(message)
            for f in copy.field:
                if (message.name, f.name) in (("ValueInfoProto", "type"), ("NodeProto", "attribute")) or (
                        not nodes and (message.name, f.name) == ("GraphProto", "node")):
                    f.type = f.TYPE_BYTES
                    f.ClearField("type_name")
                elif (message.name, f.name) in (("GraphProto", "value_info"), ("GraphProto", "node"),
                                                ("ModelProto", "graph")):
                    f.type_name = f".{package}.{f.type_name.rsplit('.', 1)[-1]}"
        pool = descriptor_pool.Default()
        try:  # made by an earlier import of this module (a reload): the pool keeps one file per name
            pool.FindFileByName(lite.name)
        except KeyError:
            pool.Add(lite)
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.ModelProto"))
    except Exception:  # noqa: BLE001 - another protobuf: read the model as onnx does
        return None


def _read_nodes_serialized(graph: Any, names: list[str],
                           parsed: Optional[dict[tuple[bytes, ...], tuple[Any, ...]]] = None) -> list[tuple[Any, ...]]:
    """``_read_nodes`` of a graph parsed by ``parse_types_serialized`` (each node's attributes are
    bytes): the rows hold each node's attributes parsed as AttributeProtos once per distinct
    attribute bytes, the same tuple for every node that repeats them (each layer of a stack). The
    node of a row is the lite message: its fields but ``attribute`` are onnx's, and its bytes
    (``SerializeToString``) are a NodeProto's; ``as_node_proto`` makes onnx's message of it.

    ``names``: gets each node's name, in order. Read here, while the loop has the node's message
    at hand, a name costs a seventh of what it costs read later by the graph walk, when the
    message has long left the CPU's caches (16 ms over the 26,394 nodes of ``encoder_26k``).
    ``parsed``: gets each distinct attributes tuple, by its bytes."""
    from onnx import AttributeProto

    parse = AttributeProto.FromString
    if parsed is None:
        parsed = {}
    parsed[()] = ()
    rows: list[tuple[Any, ...]] = []
    append, name = rows.append, names.append
    for n in graph.node:
        raw = tuple(n.attribute[:])
        attributes = parsed.get(raw)
        if attributes is None:
            attributes = parsed[raw] = tuple(map(parse, raw))
        append((n, n.op_type, n.domain, tuple(n.input[:]), tuple(n.output[:]), attributes))
        name(n.name)
    return rows


def nodes_serialized(serialized: bytes) -> Optional[tuple[list[tuple[Any, ...]], list[str], Any]]:
    """(rows, names) of ``_read_nodes_serialized`` of the main graph of ``serialized`` (a model's
    bytes) and the model they were read from (``parse_types_serialized``), or None when a node has a graph attribute (If, Loop, Scan: shape inference types the
    values of the bodies, so the inferred model's nodes are not these), the bytes parse as no
    model, or they hold value_infos (an exporter that writes every shape: the child runs no pass,
    ``build.skips_inference``, and this process reads the file itself, so rows read here would be
    wasted).

    Read by ``check._isolated_facts`` from the bytes the isolated child runs shape inference on,
    while the child runs (``build.nodes_ahead``)."""
    try:
        model = parse_types_serialized(serialized)
        if not is_types_serialized(model) or len(model.graph.value_info):
            return None
        names: list[str] = []
        parsed: dict[tuple[bytes, ...], tuple[Any, ...]] = {}
        rows = _read_nodes_serialized(model.graph, names, parsed)
        for attributes in parsed.values():  # each distinct tuple once (the rows share them)
            if any(a.type in (5, 10) for a in attributes):  # AttributeProto.GRAPH, GRAPHS
                return None
    except Exception:  # noqa: BLE001 - what is wrong is the child's to say, reading the same bytes
        return None
    return rows, names, model


def as_node_proto(node: Any) -> Any:
    """onnx's NodeProto of a node row's message (``_read_nodes_serialized``'s lite node, or a NodeProto)."""
    from onnx import NodeProto

    return node if isinstance(node, NodeProto) else NodeProto.FromString(node.SerializeToString())
