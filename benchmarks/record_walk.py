"""The static walk of an item's record through the package: every call, on every branch, that
hands the record, its plan or a part of them from one module to another (a *move*), and each
move into a module of a higher layer than the caller's (a *climb*, by pyproject.toml's layers
contract), from the session's entry (``session.PdeRun.evaluate``) on. Read from the code, not
from a run: ``benchmarks/item_path.py`` counts the moves one real item makes (a different
measure: one branch, the one that item took).

    .venv/bin/python benchmarks/record_walk.py [--list]

What carries the item, function by function:

- the entry's ``record``; a parameter annotated ``CaseRecord`` or ``ItemPlan``; a parameter
  a carrying argument was passed to;
- a name assigned from a carrying expression: a carrying name, an attribute or item of one
  (``plan.record``, ``plan.baseline``, ``record.case_spec``), or a call whose callee returns
  a ``CaseRecord`` or an ``ItemPlan``;
- ``self.X`` where a method of the class assigned a carrying expression to it.

A call carries the item when an argument (the receiver aside: the record's and the plan's own
methods are no hand-over) is carrying. Its callee is resolved by name: a function of the
module or one it imports, a method of the caller's class, a module's function, and for a
method of another object that of its class (known from an annotation, or the call that
made it), with every subclass's override and, for a protocol, every class that has the
method (all of them: every branch); a receiver of unknown type, the one class that has such
a method. Asserts nothing; prints the counts (``--list``: each move).
"""

from __future__ import annotations

import argparse
import ast
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "pytest_pdebench"
CARRIER_TYPES = {"CaseRecord", "ItemPlan"}
ENTRY = ("pytest_pdebench.session", "PdeRun.evaluate", frozenset({"record"}))


@dataclass
class Function:
    module: str
    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    cls: str | None

    @property
    def params(self) -> list[ast.arg]:
        args = self.node.args
        return [*args.posonlyargs, *args.args, *args.kwonlyargs]


@dataclass
class Package:
    functions: dict[tuple[str, str], Function] = field(default_factory=dict)
    # module -> name -> (module, attr)
    imports: dict[str, dict[str, tuple[str, str | None]]] = field(default_factory=dict)
    methods: dict[str, list[Function]] = field(default_factory=dict)  # method name -> definitions
    classes: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (module, class) -> its bases' names
    by_name: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # class name -> (module, class)
    fields: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # (module, class) -> attr -> type

    def type_in(self, text: str) -> str | None:
        """The package class an annotation or a call names (``Verdict | None``: Verdict)."""
        for word in reversed([w for w in _words(text) if w in self.by_name]):
            return word
        return None

    def is_protocol(self, class_name: str) -> bool:
        return any("Protocol" in self.classes[key] for key in self.by_name.get(class_name, []))

    def overrides(self, class_name: str, name: str) -> list[Function]:
        """``name`` as the subclasses of the class (by name) define it, at any depth."""
        found = []
        for (module, cls), bases in self.classes.items():
            if class_name in [base.split(".")[-1] for base in bases]:
                own = self.functions.get((module, f"{cls}.{name}"))
                found += ([own] if own else []) + self.overrides(cls, name)
        return found

    def method(self, class_name: str, name: str) -> Function | None:
        """``name`` of the class (by name) or of a base of it."""
        for module, cls in self.by_name.get(class_name, []):
            found = self.functions.get((module, f"{cls}.{name}"))
            if found:
                return found
            for base in self.classes[(module, cls)]:
                found = self.method(base.split(".")[-1], name)
                if found:
                    return found
        return None

    def function(self, module: str, name: str) -> Function | None:
        found = self.functions.get((module, name))
        if found is None and (module, name) in self.classes:  # a class called: its __init__
            found = self.functions.get((module, f"{name}.__init__"))
        return found


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_package() -> Package:
    package = Package()
    for path in sorted(PACKAGE.rglob("*.py")):
        if "scaffolds" in path.parts or "testing" in path.parts:
            continue
        module = module_name(path)
        tree = ast.parse(path.read_text())
        names: dict[str, tuple[str, str | None]] = {}
        base = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                origin = base.rsplit(".", node.level - 1)[0] if node.level > 1 else base
                target = f"{origin}.{node.module}" if node.module else origin
                for alias in node.names:
                    names[alias.asname or alias.name] = (target, alias.name)
        package.imports[module] = names
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                package.functions[(module, node.name)] = Function(module, node.name, node, None)
            elif isinstance(node, ast.ClassDef):
                package.classes[(module, node.name)] = [ast.unparse(b) for b in node.bases]
                package.by_name.setdefault(node.name, []).append((module, node.name))
                types = package.fields.setdefault((module, node.name), {})
                for item in ast.walk(node):  # fields, and self.X annotated or made from a class
                    if isinstance(item, ast.AnnAssign):
                        target = item.target
                        if isinstance(target, ast.Name) or (
                            isinstance(target, ast.Attribute) and ast.unparse(target.value) == "self"
                        ):
                            name = target.id if isinstance(target, ast.Name) else target.attr
                            types[name] = ast.unparse(item.annotation)
                    elif isinstance(item, ast.Assign) and isinstance(item.value, ast.Call):
                        for target in item.targets:
                            if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "self":
                                types.setdefault(target.attr, ast.unparse(item.value.func))
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        function = Function(module, f"{node.name}.{item.name}", item, node.name)
                        package.functions[(module, function.qualname)] = function
                        package.methods.setdefault(item.name, []).append(function)
    return package


def _words(text: str) -> list[str]:
    import re

    return re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text)


# methods of the builtins and of Path: a receiver of unknown type with one of these is taken
# for one of them, not followed into the package's classes of the same method name
BUILTIN_METHODS = {name for kind in (dict, list, str, set, bytes, Path) for name in dir(kind)}


def _abstract(function: Function) -> bool:
    """A protocol's or an abstract method: a docstring and ``...`` (or nothing) for a body."""
    body = function.node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return all(
        isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and n.value.value is Ellipsis for n in body
    )


def annotation_carries(annotation: ast.expr | None) -> bool:
    return annotation is not None and any(name in ast.unparse(annotation) for name in CARRIER_TYPES)


class Walk:
    def __init__(self, package: Package, layers: dict[str, int]):
        self.package, self.layers = package, layers
        self.seen: set[tuple[str, str, frozenset]] = set()
        self.moves: set[tuple[str, str, int, str, str]] = set()  # (caller module, caller, line, callee module, callee)
        self.attributes: dict[tuple[str, str], set[str]] = {}  # (module, class) -> its carrying self.X
        self.types: dict[str, str] = {}  # the function's names -> the package class they hold

    def holders(self) -> None:
        """The methods of the classes that hold the item in an attribute (the judge's
        ``self.record``): each walked too, whoever calls it (its moves pass ``self.X``)."""
        while True:  # to a fixpoint: a method walked later may give the class another carrying attribute
            before = {key: set(attrs) for key, attrs in self.attributes.items()}
            for module, cls in list(before):
                for (owner, qualname), function in list(self.package.functions.items()):
                    if owner == module and function.cls == cls:
                        self.seen.discard((module, qualname, frozenset()))
                        self.run(module, qualname, frozenset())
            if self.attributes == before:
                return

    def layer(self, module: str) -> int | None:
        parts = module.split(".")[1:]
        return self.layers.get(parts[0]) if parts else None

    def climbs(self) -> set:
        found = set()
        for move in self.moves:
            caller, callee = self.layer(move[0]), self.layer(move[3])
            if caller is not None and callee is not None and callee < caller:
                found.add(move)
        return found

    def run(self, module: str, qualname: str, carrying: frozenset) -> None:
        key = (module, qualname, carrying)
        if key in self.seen:
            return
        self.seen.add(key)
        function = self.package.functions.get((module, qualname))
        if function is None:
            return
        names = set(carrying) | {p.arg for p in function.params if annotation_carries(p.annotation)}
        self.types = {
            p.arg: t
            for p in function.params
            if p.annotation is not None and (t := self.package.type_in(ast.unparse(p.annotation)))
        }
        for node in ast.walk(function.node):  # what a name (or self.X) holds: the class of its value
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                pairs = [(target, node.value)]
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts))
                for one, value in pairs:
                    made = self._type_of(function, value)
                    if made and isinstance(one, ast.Name):
                        self.types.setdefault(one.id, made)
                    elif made and isinstance(one, ast.Attribute) and ast.unparse(one.value) == "self" and function.cls:
                        self.package.fields.setdefault((function.module, function.cls), {}).setdefault(one.attr, made)
        for _ in range(4):  # assignments, to a fixpoint (a loop's later names)
            before = len(names)
            for node in ast.walk(function.node):
                self._assign(function, node, names)
            if len(names) == before:
                break
        types = dict(self.types)
        for node in ast.walk(function.node):
            if isinstance(node, ast.Call):
                self.types = types
                self._call(function, node, names)

    def _type_of(self, function: Function, value: ast.expr) -> str | None:
        """The package class an expression's value is, where the code says (else None)."""
        if isinstance(value, ast.BoolOp):
            return next((t for v in value.values if (t := self._type_of(function, v))), None)
        if isinstance(value, ast.Call):
            if ast.unparse(value.func) == "cast" and value.args:  # cast(T, x): a T
                return self.package.type_in(ast.unparse(value.args[0]))
            return self._type_made(function, value)
        if isinstance(value, (ast.Name, ast.Attribute)) and not (isinstance(value, ast.Name) and value.id == "self"):
            return self._receiver_type(function, value)
        return None

    def _type_made(self, function: Function, call: ast.Call) -> str | None:
        """The package class a call's value is: the class called, or its callee's return type."""
        named = self.package.type_in(ast.unparse(call.func).split(".")[0])
        if named and ast.unparse(call.func) == named:
            return named
        for callee in self._callees(function, call):
            if callee.node.returns is not None:
                made = self.package.type_in(ast.unparse(callee.node.returns))
                if made == "Self" or (made is None and ast.unparse(callee.node.returns) == callee.cls):
                    return callee.cls
                if made:
                    return made
        return None

    def _receiver_type(self, function: Function, owner: ast.expr) -> str | None:
        if isinstance(owner, ast.Name):
            if owner.id in ("self", "cls"):
                return function.cls
            if owner.id in self.package.by_name:
                return owner.id
            return self.types.get(owner.id)
        if isinstance(owner, ast.Attribute):
            holder = self._receiver_type(function, owner.value)
            for module, cls in self.package.by_name.get(holder or "", []):
                text = self.package.fields.get((module, cls), {}).get(owner.attr)
                if text:
                    return self.package.type_in(text)
        return None

    def _carries(self, function: Function, expression: ast.expr | None, names: set[str]) -> bool:
        if expression is None:
            return False
        root = expression
        while isinstance(root, (ast.Attribute, ast.Subscript, ast.Starred)):
            if (
                isinstance(root, ast.Attribute)
                and isinstance(root.value, ast.Name)
                and root.value.id == "self"
                and function.cls
                and root.attr in self.attributes.get((function.module, function.cls), set())
            ):
                return True
            root = root.value
        if isinstance(root, ast.Name):
            return root.id in names
        if isinstance(root, ast.Call):  # a record or plan made, or an object made that holds the record
            callees = self._callees(function, root)
            if any(annotation_carries(f.node.returns) for f in callees):
                return True
            made = self.package.type_in(ast.unparse(root.func))
            kinds = self.package.by_name.get(made or "", [])
            holds = any("record" in self.package.fields.get(key, {}) for key in kinds)
            arguments = [*root.args, *(k.value for k in root.keywords)]
            return holds and any(self._carries(function, a, names) for a in arguments)
        if isinstance(root, (ast.Tuple, ast.List)):
            return any(self._carries(function, element, names) for element in root.elts)
        if isinstance(root, (ast.BoolOp, ast.IfExp)):
            parts = root.values if isinstance(root, ast.BoolOp) else [root.body, root.orelse]
            return any(self._carries(function, part, names) for part in parts)
        return False

    def _assign(self, function: Function, node: ast.AST, names: set[str]) -> None:
        pairs: list[tuple[ast.expr, ast.expr | None]] = []
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            pairs = [(node.target, node.value)]
        elif isinstance(node, (ast.For, ast.comprehension)):
            pairs = [(node.target, node.iter)]
        for target, value in pairs:
            targets, values = [target], [value]
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
                targets, values = list(target.elts), list(value.elts)
            for one, source in zip(targets, values):
                if not self._carries(function, source, names):
                    continue
                for name in ast.walk(one):
                    if isinstance(name, ast.Name):
                        names.add(name.id)
                    elif (
                        isinstance(name, ast.Attribute)
                        and isinstance(name.value, ast.Name)
                        and name.value.id == "self"
                        and function.cls
                    ):
                        self.attributes.setdefault((function.module, function.cls), set()).add(name.attr)

    def _callees(self, function: Function, call: ast.Call) -> list[Function]:
        target, package = call.func, self.package
        if isinstance(target, ast.Name):
            local = package.function(function.module, target.id)
            if local is not None:
                return [local]
            if target.id in package.imports.get(function.module, {}):
                origin, attr = package.imports[function.module][target.id]
                found = package.function(origin, attr or "")
                return [found] if found else []
            return []
        if not isinstance(target, ast.Attribute):
            return []
        owner = target.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls") and function.cls:
            found = package.functions.get((function.module, f"{function.cls}.{target.attr}"))
            if found:
                return [found]
        if isinstance(owner, ast.Name) and owner.id in package.imports.get(function.module, {}):
            origin, attr = package.imports[function.module][owner.id]
            module = f"{origin}.{attr}" if attr else origin
            found = package.function(module, target.attr) or package.function(origin, f"{attr}.{target.attr}")
            if found:
                return [found]
        known = self._receiver_type(function, owner)
        if known is not None and package.is_protocol(known):  # every class that has the method: each source's draft
            return [f for f in package.methods.get(target.attr, []) if not _abstract(f)]
        if known is not None:  # its method, and every subclass's
            found = [f for f in [package.method(known, target.attr)] if f and not _abstract(f)]
            return found + package.overrides(known, target.attr)
        if target.attr in BUILTIN_METHODS:
            return []
        candidates = package.methods.get(target.attr, [])  # a receiver of unknown type: a method only one class has
        return candidates if len(candidates) == 1 else []

    def _call(self, function: Function, call: ast.Call, names: set[str]) -> None:
        positional = [self._carries(function, a, names) for a in call.args]
        keywords = {k.arg: self._carries(function, k.value, names) for k in call.keywords if k.arg}
        if not any(positional) and not any(keywords.values()):
            return
        for callee in self._callees(function, call):
            params = [p.arg for p in callee.params]
            if callee.cls and params and params[0] in ("self", "cls"):
                params = params[1:]
            carried = {params[i] for i, flag in enumerate(positional) if flag and i < len(params)}
            carried |= {name for name, flag in keywords.items() if flag and name in params}
            if callee.module != function.module:
                self.moves.add((function.module, function.qualname, call.lineno, callee.module, callee.qualname))
            self.run(callee.module, callee.qualname, frozenset(carried))


def layers_of() -> dict[str, int]:
    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    return {name.strip(): index for index, layer in enumerate(contract["layers"]) for name in layer.split("|")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each move (a climb marked ^)")
    args = parser.parse_args()
    walk = Walk(read_package(), layers_of())
    walk.run(*ENTRY)
    walk.holders()
    climbs = walk.climbs()
    if args.list:
        for move in sorted(walk.moves):
            caller_module, caller, line, callee_module, callee = move
            mark = "^" if move in climbs else " "
            short = lambda m: m.removeprefix("pytest_pdebench.")  # noqa: E731
            print(f"{mark} {short(caller_module)}.{caller}:{line} -> {short(callee_module)}.{callee}")
    reached = {(module, name) for module, name, _ in walk.seen}
    print(
        f"from session.PdeRun.evaluate: {len(walk.moves)} moves, {len(climbs)} climbs "
        f"({len(reached)} functions reached carrying the item)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
