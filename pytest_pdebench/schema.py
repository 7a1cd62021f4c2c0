"""JSON Schema (draft 2020-12) of a case record, generated from the pydantic models.

``cases/schema.json`` is this schema written to disk (``pdebench schema``); a test
keeps the two identical, so tools outside Python can validate records too. The schema
and the check against it live in ``cases.py`` with the models they come from.
"""

from __future__ import annotations

import json

from .cases import SCHEMA_ID, case_record_schema, schema_errors  # noqa: F401  (what this module offers)


def schema_text() -> str:
    return json.dumps(case_record_schema(), indent=2, sort_keys=True) + "\n"
