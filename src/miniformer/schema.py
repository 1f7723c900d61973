"""A JSON Schema of params.yaml, generated from the config dataclasses: for editors (completion, types) and for
`snakemake.utils.validate`. The loader in params.py stays the one validator (ranges, combinations, sweeps); the
schema only knows the keys and their types. tests/test_structure.py keeps workflow/schemas/params.schema.json equal
to what this writes (`python -m miniformer.schema > workflow/schemas/params.schema.json`)."""

from __future__ import annotations

import json
from dataclasses import MISSING, fields

from miniformer.params import GROUPS, PROFILES, SECTIONS, TRACKERS, FindingsConfig

# a dataclass field's annotation (a string: the modules use postponed annotations) -> its JSON type; an int is a number
JSON_TYPES = {"int": "integer", "float": ["integer", "number"], "bool": "boolean", "str": "string", "list": "array"}


def section_schema(cls: type) -> dict:
    """Every field of a config dataclass, with its type and default; no other key."""
    props = {}
    for f in fields(cls):
        entry: dict = {"type": JSON_TYPES[f.type if isinstance(f.type, str) else f.type.__name__]}
        if f.default is not MISSING:
            entry["default"] = f.default
        props[f.name] = entry
    return {"type": "object", "properties": props, "additionalProperties": False}


def params_schema() -> dict:
    sections = {name: section_schema(cls) for name, cls in SECTIONS.items()}
    overrides = {name: sections[name] for name in ("model", "train", "eval")}
    experiment = {"type": "object", "required": ["group"], "additionalProperties": False, "properties": {
        "group": {"enum": list(GROUPS)}, "hypothesis": {"type": "string"}, "all_seeds": {"anyOf": [
            {"type": "boolean"}, {"type": "array", "items": {"enum": list(PROFILES)}, "minItems": 1}]},
        "seeds": {"type": "integer", "minimum": 1},
        "peer": {"type": "boolean"},
        "profiles": {"type": "array", "items": {"enum": list(PROFILES)}, "minItems": 1},
        "sweep": {"type": "object", "additionalProperties": {"type": "array"}},
        "ladder": {"type": "object", "additionalProperties": {"type": "array"}},
        **overrides}}
    profile = {"type": "object", "additionalProperties": False,
               "properties": {"seeds_per_experiment": {"type": "integer", "minimum": 1},
                              "experiments": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                              "sweeps": {"type": "boolean"}, "ladders": {"type": "boolean"}, **sections}}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "miniformer params.yaml",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "profile": {"enum": list(PROFILES)},
            "tracking": {"enum": list(TRACKERS)},
            **sections,
            "findings": section_schema(FindingsConfig),
            "seeds": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
            "profiles": {"type": "object", "additionalProperties": False,
                         "properties": {p: profile for p in PROFILES}},
            "experiments": {"type": "object", "additionalProperties": experiment},
        },
    }


def schema_text() -> str:
    return json.dumps(params_schema(), indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(schema_text(), end="")
