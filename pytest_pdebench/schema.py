"""JSON Schema (draft 2020-12) of a case record, generated from the pydantic models.

``cases/schema.json`` is this schema written to disk (``pdebench schema``); a test
keeps the two identical, so tools outside Python can validate records too.
"""

from __future__ import annotations

import functools
import json

SCHEMA_ID = "https://pytest-pdebench.invalid/schema/case-record.json"


@functools.lru_cache(maxsize=1)
def case_record_schema() -> dict:
    from .cases import CaseRecord

    schema = CaseRecord.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


def schema_text() -> str:
    return json.dumps(case_record_schema(), indent=2, sort_keys=True) + "\n"


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema

    schema = case_record_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def schema_errors(data) -> list[str]:
    """Human-readable schema violations of one record (empty when it conforms)."""
    errors = sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    messages = []
    for error in errors:
        where = "/".join(str(p) for p in error.absolute_path) or "(record)"
        messages.append(f"at {where}: {error.message[:300]}")
    return messages
