"""Case records (the paper's Appendix J layout) as pydantic models, JSONL loading
with file:line errors, the JSON Schema export and the agent view.

Only ``agent_view(record, library)`` may cross into a prompt or a sandbox: it holds
``case_spec`` and ``target_library`` and nothing else.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from .domains import DomainError, resolve_geometry
from .expression_syntax import UNKNOWN_NAMES, ExpressionError, check_expression
from .vocabulary import CONSTRUCTION_METHODS, DOMAIN_TYPES, FAMILIES, LIBRARIES, MATH_TYPES, PARAMETERS

# the names live in vocabulary.py (the plugin's markers read them without pydantic)
TIME_DEPENDENT_FAMILIES = ("heat", "reaction_diffusion", "burgers", "wave")  # conv.-diff. and NS: either
OUTCOMES = ("PASS", "F-Exec", "F-Acc", "F-Time")
BC_KINDS = ("dirichlet", "neumann", "robin", "laplacian")

# Literal[a tuple]: pydantic takes the tuple's values (one list of names, shared with the
# markers and the CLI), mypy wants them written out, hence the ignores
Family = Literal[FAMILIES]  # type: ignore[valid-type]
MathType = Literal[MATH_TYPES]  # type: ignore[valid-type]
Library = Literal[LIBRARIES]  # type: ignore[valid-type]
DomainType = Literal[DOMAIN_TYPES]  # type: ignore[valid-type]

Expression = str | float | int
# fields whose expressions may use the unknown u (u_t - eps*lap(u) + R(u) = f)
UNKNOWN_ALLOWED = {"case_spec.pde.params.reaction"}
ExpressionOrVector = Expression | list[Expression]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Classification(Strict):
    equation_family: Family
    math_type: list[MathType] = Field(min_length=1)


class Forcing(Strict):
    type: Literal["expression"] = "expression"
    value: ExpressionOrVector


class TimeSpec(Strict):
    t0: float = 0.0
    t_end: float

    @model_validator(mode="after")
    def _ordered(self):
        if not self.t_end > self.t0:
            raise ValueError(f"time.t_end ({self.t_end}) must be greater than time.t0 ({self.t0})")
        return self


class PDE(Strict):
    type: Family
    params: dict[str, ExpressionOrVector] = Field(default_factory=dict)
    forcing: Forcing | None = None
    time: TimeSpec | None = None


class Domain(Strict):
    type: DomainType
    bounds: list[list[float]] | None = None
    geometry_params: dict[str, Any] | None = None


class BoundaryCondition(Strict):
    """One condition on a list of boundary tags (or ``"boundary"``: all of it)."""

    on: str | list[str]
    value: ExpressionOrVector = 0.0
    alpha: Expression | None = None  # Robin: kappa du/dn + alpha u = value

    @property
    def tags(self) -> list[str]:
        return [self.on] if isinstance(self.on, str) else list(self.on)


class Periodic(Strict):
    directions: list[Literal["x", "y", "z"]] = Field(min_length=1)


Conditions = BoundaryCondition | list[BoundaryCondition]


class BoundaryConditions(Strict):
    """Each kind is one condition or a list of them (different data on different tags)."""

    dirichlet: Conditions | None = None
    neumann: Conditions | None = None
    robin: Conditions | None = None
    periodic: Periodic | None = None
    # biharmonic only: lap(u) on the boundary (Navier / simply supported data)
    laplacian: Conditions | None = None

    def conditions(self, kind: str) -> list[BoundaryCondition]:
        value = getattr(self, kind)
        return [] if value is None else value if isinstance(value, list) else [value]


class InitialCondition(Strict):
    value: ExpressionOrVector
    velocity: ExpressionOrVector | None = None  # second-order-in-time families (wave)


class EvalGridSpec(Strict):
    type: Literal["cartesian"] = "cartesian"
    nx: int = Field(ge=2, le=2000)
    ny: int = Field(ge=2, le=2000)
    nz: int | None = Field(default=None, ge=2, le=500)
    bbox: list[float]

    @model_validator(mode="after")
    def _consistent(self):
        if len(self.bbox) not in (4, 6):
            raise ValueError("eval_grid.bbox is [x0,x1,y0,y1] or [x0,x1,y0,y1,z0,z1]")
        if (len(self.bbox) == 6) != (self.nz is not None):
            raise ValueError("a 3-D eval_grid needs nz and a 6-entry bbox; a 2-D one neither")
        if any(self.bbox[2 * i] >= self.bbox[2 * i + 1] for i in range(len(self.bbox) // 2)):
            raise ValueError(f"eval_grid.bbox {self.bbox} has an empty interval")
        return self


class Output(Strict):
    """What the solver returns: ``scalar`` (array ``u``), a derived scalar named by
    ``field`` (e.g. ``velocity_magnitude``: array of that name), or the component
    arrays listed in ``components`` (e.g. ``["u_x", "u_y", "p"]``)."""

    format: Literal["npz"] = "npz"
    field: str = Field(default="scalar", pattern=r"^[a-z][a-z0-9_]*$")
    components: list[str] | None = None

    @property
    def arrays(self) -> list[str]:
        """Names of the solution arrays the solver must write."""
        if self.components:
            return list(self.components)
        return ["u"] if self.field == "scalar" else [self.field]


class CaseSpec(Strict):
    pde: PDE
    domain: Domain
    bc: BoundaryConditions = Field(default_factory=BoundaryConditions)
    ic: InitialCondition | None = None
    eval_grid: EvalGridSpec
    output: Output = Field(default_factory=Output)


class EvaluationConfig(Strict):
    target_metric: Literal["rel_L2_grid"] = "rel_L2_grid"
    timeout_sec: float = Field(default=300.0, gt=0)
    alpha_acc: float = Field(default=10.0, gt=0)
    alpha_time: float = Field(default=3.0, gt=0)
    tau_min: float = Field(default=1e-6, ge=0)
    tau_max: float = Field(default=8e-3, gt=0)  # ours, not the paper's: calibration.py


class Thresholds(Strict):
    """A library's calibration, materialized: baseline error/time and the taus."""

    e_base: float = Field(ge=0)
    t_base: float = Field(gt=0)
    tau_acc: float = Field(gt=0)
    tau_time: float = Field(gt=0)
    machine: str
    calibrated_at: str | None = None
    # the baseline's first (gated) run, kernels compiled in it: the first-run gate's base
    t_first_base: float | None = Field(default=None, gt=0)


class CalibrationSetting(Strict):
    """The discretization the oracle uses as a library's calibration baseline (the paper's
    "standard calibration configuration"). Only the calibration run sees it, as
    ``calibration_config.json`` in its working folder; the agent never does."""

    element_degree: int = Field(ge=1, le=3)  # Taylor-Hood flows: the velocity degree (pressure one lower)
    cells_per_side: int = Field(ge=2, le=1024)  # mesh size h = L / cells_per_side, L the domain's largest side
    dt: float | None = Field(default=None, gt=0)  # largest time step (transient families only)
    solver: Literal["direct"] = "direct"


class CalibrationConfig(Strict):
    source: str  # where the settings come from (an upstream record, or the draw that made them)
    settings: dict[Library, CalibrationSetting]
    upstream_oracle: dict[str, Any] | None = None  # imported records: the upstream oracle_config's solver part


class Variant(Strict):
    """A live variant (making/variants.py): drawn afresh from a published record's design."""

    seed: int
    of: str = Field(pattern=r"^[0-9a-f]{16}$")  # record_digest of the published record it varies
    draw: int = Field(default=0, ge=0)  # 0: the seed's first draw; k: its k-th draw again (the earlier carried no part)


class SolveOnlyPart(Strict):
    """The part delta of a manufactured record's solution that only a solve recovers
    (making/solve_only.py), so that no reading of the data gives the answer: the solution
    is the manufactured u plus delta, which the term ``forcing`` of the record's forcing
    drives with homogeneous boundary and initial data. delta is stored on the evaluation
    grid at t_end (``path``, relative to the case file's folder; evaluator-only, never
    mounted into a run), per component."""

    forcing: ExpressionOrVector
    path: str
    digest: str = Field(pattern=r"^[0-9a-f]{16}$")  # of the stored arrays
    share: float = Field(gt=0)  # ||delta|| / ||u|| (the manufactured one) on the grid at t_end
    miss: float = Field(gt=0)  # the evaluator's error of the manufactured u against u + delta
    reference_error: float = Field(ge=0)  # ||delta at level 1 - at level 2|| / ||u + delta||
    build: dict[str, Any] = Field(default_factory=dict)  # how it was built (levels, scale, the checks' figures)

    def stored_error(self) -> float:
        """The estimate of the stored delta's own error, relative to the solution (from the
        build's gaps between levels: ``stored_error``)."""
        return stored_error(self.reference_error, self.build.get("g01", 0.0), self.build.get("g12", 0.0))


SLOWEST_RATIO = 0.25  # a solve-only part's error estimate assumes its levels' gaps shrink at least this much


def stored_error(gap: float, g01: float, g12: float) -> float:
    """The error of the finest level of a refinement, relative to the solution, from the gap
    between levels 1 and 2 (``gap``, relative): the geometric tail gap * r / (1 - r) of the
    gaps' ratio r = g12 / g01, r taken no smaller than SLOWEST_RATIO (a pre-asymptotic coarse
    level would make it look smaller than it is; P2's own ratio is 1/8)."""
    ratio = max(g12 / g01 if g01 > 0 else 0.0, SLOWEST_RATIO)
    return gap * ratio / (1 - ratio) if ratio < 1 else math.inf


class EvaluationMetadata(Strict):
    construction_method: Literal[CONSTRUCTION_METHODS]  # type: ignore[valid-type]  # (see Family)
    manufactured_solution: dict[str, ExpressionOrVector] | None = None
    solve_only: SolveOnlyPart | None = None  # manufactured records: the part no text gives
    reference_config: dict[str, Any] | None = None
    calibration_config: CalibrationConfig | None = None
    reference_path: str | None = None
    calibration_path: str | None = None
    thresholds: dict[Library, Thresholds] = Field(default_factory=dict)
    # 2: the agent-visible data differ from the exact solution (no datum is the answer),
    # checked by --pde-validate; absent: built before that (boundary data = the exact solution)
    data_revision: int | None = Field(default=None, ge=1)
    variant: Variant | None = None  # set on a live variant only


class Tags(Strict):
    structure: list[str] = Field(default_factory=list)
    difficulty: list[str] = Field(default_factory=list)


class CaseRecord(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$", max_length=120)
    pde_classification: Classification
    case_spec: CaseSpec
    evaluation_config: EvaluationConfig = Field(default_factory=EvaluationConfig)
    evaluation_metadata: EvaluationMetadata
    tags: Tags = Field(default_factory=Tags)
    supported_libraries: list[Library] = Field(min_length=1)

    @field_validator("supported_libraries")
    @classmethod
    def _unique_libraries(cls, value):
        if len(set(value)) != len(value):
            raise ValueError("supported_libraries lists a library twice")
        return value

    @model_validator(mode="after")
    def _cross_field_checks(self, info: ValidationInfo):
        spec = self.case_spec
        family = self.pde_classification.equation_family
        if spec.pde.type != family:
            raise ValueError(f"case_spec.pde.type {spec.pde.type!r} differs from equation_family {family!r}")
        if family in TIME_DEPENDENT_FAMILIES and spec.pde.time is None:
            raise ValueError(f"a {family} case needs case_spec.pde.time")
        if spec.pde.time is not None and spec.ic is None:
            raise ValueError("a time-dependent case needs case_spec.ic")
        try:
            geometry = resolve_geometry(spec.domain.model_dump(exclude_none=True))
        except DomainError as exc:
            raise ValueError(str(exc)) from None
        grid_dim = 3 if spec.eval_grid.nz is not None else 2
        if grid_dim != geometry.dim:
            raise ValueError(f"a {geometry.dim}-D domain needs a {geometry.dim}-D eval_grid")
        for kind in BC_KINDS:
            unknown = [tag for c in spec.bc.conditions(kind) for tag in c.tags if tag not in geometry.tags]
            if unknown:
                raise ValueError(
                    f"bc.{kind}.on names unknown tags {unknown}; {spec.domain.type} has {list(geometry.tags)}"
                )
        known = PARAMETERS.get(self.family, tuple(spec.pde.params))  # a family not listed: not checked
        unknown_names = sorted(set(spec.pde.params) - set(known))
        if unknown_names:
            raise ValueError(
                f"pde.params names {', '.join(unknown_names)}, which {self.family} does not have; "
                f"its parameters: {', '.join(known) or 'none'}"
            )
        if spec.bc.periodic is not None and spec.domain.type != "periodic_square":
            raise ValueError("bc.periodic is only defined on the periodic_square domain")
        method = self.evaluation_metadata.construction_method
        if method == "manufactured_solution" and not self.evaluation_metadata.manufactured_solution:
            raise ValueError(
                "construction_method manufactured_solution needs evaluation_metadata.manufactured_solution"
            )
        if method == "reference_numerical" and not self.evaluation_metadata.reference_config:
            raise ValueError("construction_method reference_numerical needs evaluation_metadata.reference_config")
        if info.context and info.context.get(EXPRESSIONS_CHECKED):
            return self  # its case file passed these checks whole before (iter_case_lines)
        for where, value in self.expressions():
            try:
                check_expression(value, allow=UNKNOWN_NAMES if where in UNKNOWN_ALLOWED else ())
            except ExpressionError as exc:
                raise ValueError(f"{where}: {exc}") from None
        return self

    # -- helpers --

    def expressions(self) -> Iterator[tuple[str, Expression]]:
        """Every expression field of the record, with its dotted location."""
        spec = self.case_spec

        def walk(where: str, value):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    yield from walk(f"{where}[{i}]", item)
            elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
                yield where, value

        for name, value in spec.pde.params.items():
            yield from walk(f"case_spec.pde.params.{name}", value)
        if spec.pde.forcing:
            yield from walk("case_spec.pde.forcing.value", spec.pde.forcing.value)
        for kind in BC_KINDS:
            for i, condition in enumerate(spec.bc.conditions(kind)):
                yield from walk(f"case_spec.bc.{kind}[{i}].value", condition.value)
                if condition.alpha is not None:
                    yield from walk(f"case_spec.bc.{kind}[{i}].alpha", condition.alpha)
        if spec.ic:
            yield from walk("case_spec.ic.value", spec.ic.value)
            if spec.ic.velocity is not None:
                yield from walk("case_spec.ic.velocity", spec.ic.velocity)
        for name, value in (self.evaluation_metadata.manufactured_solution or {}).items():
            yield from walk(f"evaluation_metadata.manufactured_solution.{name}", value)

    @property
    def family(self) -> str:
        return self.pde_classification.equation_family

    @property
    def domain_type(self) -> str:
        return self.case_spec.domain.type

    def case_spec_dict(self) -> dict:
        return self.case_spec.model_dump(mode="json", exclude_none=True)


def agent_view(record: CaseRecord, library: str) -> dict:
    """The only part of a record a solver or a prompt may see."""
    return {"case_spec": record.case_spec_dict(), "target_library": library}


# ---- loading ----


class CaseFileError(Exception):
    """A JSONL case file that cannot be used; the message names file and line."""

    def __init__(self, path: Path, line: int, message: str):
        self.path, self.line = Path(path), line
        super().__init__(f"{path}:{line}: {message}")


def _format_validation_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        location = ".".join(str(p) for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{location}: {message}" if location else message)
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def parse_record(data: Any, path: Path, line: int, context: dict | None = None) -> CaseRecord:
    try:
        return CaseRecord.model_validate(data, context=context)
    except ValidationError as exc:
        error = exc
    # the schema is the models' own (strict, no extra keys; a test keeps them agreeing), so
    # it is consulted only for a record the models reject: its messages name the field path
    # (checking every record with jsonschema was half of collecting the suite)
    problems = schema_errors(data)
    if problems:
        raise CaseFileError(path, line, f"record {_record_id(data)} does not match cases/schema.json: {problems[0]}")
    raise CaseFileError(path, line, f"record {_record_id(data)} is invalid: {_format_validation_error(error)}")


def _record_id(data: Any) -> str:
    return repr(data.get("id")) if isinstance(data, dict) and "id" in data else "(no id)"


EXPRESSIONS_CHECKED = "expressions_checked"  # a validation context's key: the file passed the checks before


@functools.cache
def _checks_version() -> str:
    """What a record's load checks are: the code of the expression whitelist and of the models."""
    from . import expression_syntax

    digest = hashlib.sha256()
    for module in (expression_syntax.__file__, __file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()[:16]


def _checked_marker(content: bytes) -> Path:
    from .bundled import cache_root

    digest = hashlib.sha256(content).hexdigest()[:32]
    return cache_root() / "checked-cases" / f"{digest}-{_checks_version()}"


def iter_case_lines(path: Path) -> Iterator[tuple[int, str | None, CaseRecord | CaseFileError]]:
    """Yield (line number, id if readable, record or the error) for each non-blank line,
    without stopping at a bad one (validation reports each record on its own).

    Checking the expressions of every record is most of a load (the suite's 200,000 syntax
    nodes): a file whose every record passed, byte for byte under the same checks, is marked
    in the cache and its expressions are not walked again (the models' other checks still
    run; and every expression is checked again where it is turned into sympy, so the marker
    saves time only, never a check on what a run computes)."""
    path = Path(path)
    content = path.read_bytes()
    marker = _checked_marker(content)
    checked_before = marker.is_file()
    context = {EXPRESSIONS_CHECKED: True} if checked_before else None
    clean = True
    # read as open() reads text (newlines \n, \r\n or \r), not str.splitlines (which also splits at
    # the separators a JSON string may hold, U+2028 say)
    for line_no, text in enumerate(io.StringIO(content.decode("utf-8"), newline=None), start=1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            clean = False
            yield line_no, None, CaseFileError(path, line_no, f"malformed JSON: {exc.msg} (column {exc.colno})")
            continue
        case_id = data.get("id") if isinstance(data, dict) and isinstance(data.get("id"), str) else None
        try:
            record = parse_record(data, path, line_no, context)
        except CaseFileError as exc:
            clean = False
            yield line_no, case_id, exc
            continue
        yield line_no, case_id, record
    if clean and not checked_before:
        _mark_checked(marker)


KEPT_MARKERS = 2000  # checked case files remembered (an empty file each; a test suite writes many)


def _mark_checked(marker: Path) -> None:
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
        markers = list(marker.parent.iterdir())
        if len(markers) > KEPT_MARKERS:  # the oldest half goes
            markers.sort(key=lambda path: path.stat().st_mtime)
            for old in markers[: len(markers) // 2]:
                old.unlink(missing_ok=True)
    except OSError:  # a read-only cache, another process pruning: the next load checks again
        pass


def iter_case_file(path: Path) -> Iterator[tuple[int, CaseRecord]]:
    """Yield (line number, record) for each non-blank line; the first bad line raises."""
    for line_no, _, item in iter_case_lines(path):
        if isinstance(item, CaseFileError):
            raise item
        yield line_no, item


def case_files(path: Path) -> list[Path]:
    path = Path(path)
    if path.is_dir():
        return sorted(path.rglob("*.jsonl"))
    if path.is_file():
        return [path]
    raise FileNotFoundError(f"no case file or directory at {path}")


def claim_id(seen: dict[str, str], record: CaseRecord, path: Path, line: int) -> None:
    """Record where an id was first seen; a second sighting is an error naming both."""
    if record.id in seen:
        raise CaseFileError(path, line, f"duplicate case id {record.id!r} (first at {seen[record.id]})")
    seen[record.id] = f"{path}:{line}"


def load_cases(path: Path) -> list[tuple[Path, int, CaseRecord]]:
    """All records under a file or directory, rejecting duplicate ids."""
    seen: dict[str, str] = {}
    records = []
    for file in case_files(path):
        for line, record in iter_case_file(file):
            claim_id(seen, record, file, line)
            records.append((file, line, record))
    return records


def write_case_file(path: Path, records: list[CaseRecord]) -> None:
    lines = [json.dumps(r.model_dump(mode="json", exclude_none=True), separators=(",", ":")) for r in records]
    tmp = Path(path).with_name(f".{Path(path).name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # a reader never sees half a file (calibration and materialize run side by side)


# --- the JSON Schema of a record (cases/schema.json: `pdebench schema` writes schema_text) ---

SCHEMA_ID = "https://pytest-pdebench.invalid/schema/case-record.json"


@functools.lru_cache(maxsize=1)
def case_record_schema() -> dict:
    """The JSON Schema of a record, from the models themselves (``cases/schema.json``)."""
    schema = CaseRecord.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID, **schema}


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


def schema_text() -> str:
    """``cases/schema.json`` as ``pdebench schema`` writes it (a test keeps the two identical,
    so tools outside Python can validate records too)."""
    return json.dumps(case_record_schema(), indent=2, sort_keys=True) + "\n"
