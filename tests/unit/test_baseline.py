"""baseline.validate: the plain checks that spare jsonschema never accept what the schema refuses
(documents in memory; the baseline's life cycle in pytest runs is tests/acceptance/test_baseline.py)."""

from __future__ import annotations

import copy
import json
import random

import jsonschema

from pytest_npucheck import baseline as bl

SCHEMA = json.loads(bl.SCHEMA_PATH.read_text())
VALIDATOR = jsonschema.validators.validator_for(SCHEMA)(SCHEMA)

ENTRY = {"test": "t.py::test_a", "target": "rknn@2.5.0/rk3588", "op_type": "Pad", "node": "pad_0", "verdict": "cpu",
         "reason": "accepted", "location": {"module": "enc.pad", "file": "nets.py", "line": 3}}
VALID = {"format": 1, "entries": [ENTRY, {**ENTRY, "node": "", "location": None, "link": "https://x", "call": 2}]}

# values that break some rule of the schema somewhere, or pass it (bools for ints, floats, empties, ...)
ODD = [None, True, False, 0, 1, 2, 2.0, -1, "", "x", "cpu", "unsupported", "npu", "rknn@2.5.0/rk3588\n", "RKNN@1/a",
       "rknn@/a", [], {}, {"module": "", "file": "f", "line": 1}, {"module": 1, "file": "f", "line": 1},
       {"module": "", "file": "", "line": 1}, {"module": "", "file": "f", "line": 0},
       {"module": "", "file": "f", "line": True}, {"module": "", "file": "f", "line": 1, "extra": 1}]


def _schema_ok(doc) -> bool:
    return not list(VALIDATOR.iter_errors(doc))


def test_a_valid_baseline_takes_the_plain_path():
    assert bl._plainly_valid(VALID) and _schema_ok(VALID)
    assert bl.validate(VALID) == []
    assert bl.validate({"format": 1, "entries": [{**ENTRY, "verdict": "unsupported"}]})[0].startswith("$.entries.0 ")


def test_the_plain_checks_never_accept_what_the_schema_refuses():
    rng = random.Random(28)
    keys = sorted(bl._ENTRY_KEYS) + ["format", "entries", "extra"]
    plain = schema = 0
    for _ in range(1200):
        doc = copy.deepcopy(VALID)
        for _ in range(rng.randint(1, 2)):
            where = rng.choice(["doc", "entry", "entry", "entry"])
            entries = doc.get("entries") if isinstance(doc.get("entries"), list) else []
            entries = [e for e in entries if isinstance(e, dict)]
            target = doc if where == "doc" or not entries else rng.choice(entries)
            key = rng.choice(keys)
            if rng.random() < 0.2:
                target.pop(key, None)
            else:
                target[key] = copy.deepcopy(rng.choice(ODD))
        ok = _schema_ok(doc)
        schema += ok
        if bl._plainly_valid(doc):
            plain += 1
            assert ok, doc
        elif ok:  # the schema's word: validate() agrees with it either way
            assert not [p for p in bl.validate(doc) if not p.startswith("$.entries.") or "cannot be accepted" not in p]
        else:
            assert bl.validate(doc)
    assert plain > 30 and schema > plain / 2  # both kinds of document were met
