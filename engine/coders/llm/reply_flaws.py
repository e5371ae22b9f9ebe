"""The checks behind the reply rules (engine.coders.llm.reply_rules) that pyflakes does not make
(engine.coders.llm.reply_flakes makes those): each reads a scaffolded reply, without running it, and
says in a sentence why it would fail at once, or returns None. The general ones import the checked
modules to learn what pyflakes cannot: whether a module is installed here, which names it has, which
keywords its classes take.

Pipelines run with this Python, so what imports here imports there.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import symtable
import warnings

# from these, a `from M import NAME` is checked name by name (importing them has no side effects)
CHECKED_FROM = ("numpy", "scipy", "sklearn", "pandas", "joblib")
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def repeats(assembled: str, failed: str) -> str | None:
    """A debug reply that is the code which just failed, unchanged but for comments, docstrings and
    repeated lines, as a sentence; it would fail again the same way. None: it changed something."""
    gist = _gist(assembled)
    if gist is None or gist != _gist(failed):
        return None
    return "the reply is the code that just failed, unchanged, and would fail again: change what the error names"


def pipeline_fit_keyword(tree: ast.Module, live: set[str]) -> str | None:
    """A Pipeline's fit() given a keyword that names no step (`sample_weight=`, not
    `logisticregression__sample_weight=`): scikit-learn refuses it ("Pipeline.fit does not accept
    the sample_weight parameter"). Pipelines are the ones made in the same function."""
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in live):
        pipes = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and _makes_pipeline(n.value)
                 for t in n.targets if isinstance(t, ast.Name)}
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
            if not isinstance(call.func, ast.Attribute) or call.func.attr != "fit":
                continue
            target = call.func.value
            if not (_makes_pipeline(target) or isinstance(target, ast.Name) and target.id in pipes):
                continue
            loose = [k.arg for k in call.keywords if k.arg is not None and "__" not in k.arg]
            if loose:
                return (f"the reply passes {loose[0]}= to a Pipeline's fit(), which takes only a step's own: "
                        f"name the step, as <step name>__{loose[0]}= (make_pipeline names each step by its class "
                        f"in lower case: logisticregression__{loose[0]}=)")
    return None


def _makes_pipeline(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and (_dotted(node.func) or "").rsplit(".", 1)[-1] in ("make_pipeline", "Pipeline")


def features_reads_files(tree: ast.Module, own: set[str]) -> str | None:
    """A features() (or a helper of the reply's that it calls) that opens or loads files: it gets the
    images themselves, and the model it might load is not saved until train() has run. A features()
    that asks what X is (isinstance(X, np.ndarray)) may read files only for other input: no flaw."""
    defs = {n.name: n for n in tree.body if isinstance(n, DEFS) and n.name in own}
    if "features" not in defs or _checks_type_of_x(defs["features"]):
        return None
    for name in reachable(tree, {"features"}, module_level=False) & set(defs):
        for call in (n for n in ast.walk(defs[name]) if isinstance(n, ast.Call)):
            called = _dotted(call.func)
            if called is not None and (called in _READERS or called.rsplit(".", 1)[-1] in _READER_METHODS):
                return (f"the reply's features() reads files ({called}()), but features(X) gets the images "
                        "themselves, X, a float32 array (n, SIZE, SIZE, 3) already loaded: compute its rows from X")
    return None


def features_makes_pil_images(tree: ast.Module, own: set[str]) -> str | None:
    """A features() (or a helper of the reply's that it calls) that hands X's float images to
    Image.fromarray(), which takes bytes: PIL refuses float32 colour images ("Cannot handle this
    data type: (1, 1, 3), <f4"). A call whose argument says uint8 is no flaw."""
    defs = {n.name: n for n in tree.body if isinstance(n, DEFS) and n.name in own}
    if "features" not in defs:
        return None
    for name in reachable(tree, {"features"}, module_level=False) & set(defs):
        for call in (n for n in ast.walk(defs[name]) if isinstance(n, ast.Call)):
            if (_dotted(call.func) or "").endswith("fromarray") and "uint8" not in ast.unparse(call):
                return ("the reply's features() gives X's images to Image.fromarray(), which cannot take them: "
                        "they are float32 (values 0-1), already SIZE x SIZE. Compute the rows from X with numpy "
                        "(to change the size, set SIZE = <pixels>)")
    return _pil_method_on_image(defs["features"])


def _pil_method_on_image(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str | None:
    """`img.convert("RGB")` for each img of X: the images are numpy arrays, not PIL images, and an
    array has no convert() (AttributeError)."""
    if not isinstance(fn, ast.FunctionDef) or not fn.args.args:
        return None
    x = fn.args.args[0].arg
    loops = [n for n in ast.walk(fn) if isinstance(n, ast.For | ast.comprehension)]
    each = {n.target.id for n in loops if isinstance(n.target, ast.Name) and isinstance(n.iter, ast.Name)
            and n.iter.id == x}
    for method in (n.func for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
        receiver = method.value
        if method.attr == "convert" and isinstance(receiver, ast.Name) and receiver.id in each:
            return (f"the reply's features() calls {receiver.id}.convert() on each of {x}'s images, which are numpy "
                    "arrays (float32, values 0-1, already SIZE x SIZE), not PIL images: compute from the arrays")
    return None


def features_uses_training_names(code: str, tree: ast.Module, own: set[str]) -> str | None:
    """A features() (or a helper of the reply's that it calls) that reads a name only the scaffold's
    `__main__` block binds (skin_tone, y, X_tr): it is there while training, and predict(folder),
    which has the images only, fails with a NameError."""
    main = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    stored = {n.id for m in main for n in ast.walk(m) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    elsewhere = {n.id for stmt in tree.body if stmt not in main for n in ast.walk(stmt)
                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    only_main = stored - elsewhere - {n.name for n in tree.body if isinstance(n, DEFS)}
    reach = reachable(tree, {"features"}, module_level=False) & own
    if not only_main or "features" not in reach:
        return None
    try:
        table = symtable.symtable(code, "<pipeline>", "exec")
    except SyntaxError:
        return None
    stack = [child for child in table.get_children() if child.get_name() in reach]
    while stack:
        child = stack.pop(0)
        for name in (s.get_name() for s in child.get_symbols() if s.is_referenced() and s.is_global()):
            if name in only_main:
                return (f"the reply's features() uses {name}, which exists only while training: predict(folder) "
                        "calls features() with the images alone")
        stack.extend(child.get_children())
    return None


def indexes_x_by_name(tree: ast.Module) -> str | None:
    """features() or train() indexing X by a column name (X["image_name"]): X is a numpy array."""
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("features", "train")):
        if not fn.args.args:
            continue
        x = fn.args.args[0].arg
        for sub in (n for n in ast.walk(fn) if isinstance(n, ast.Subscript)):
            key = sub.slice
            if isinstance(sub.value, ast.Name) and sub.value.id == x and isinstance(key, ast.Constant) \
                    and isinstance(key.value, str):
                return (f"the reply's {fn.name}() reads {x}[{key.value!r}], but {x} is a numpy array of numbers "
                        "(no columns, no file names)")
    return None


# calls that open or load a file: by full name, or by the method's name on any object
_READERS = frozenset({"open", "load_image", "Image.open", "PIL.Image.open", "joblib.load", "np.load", "numpy.load",
                      "pickle.load", "os.listdir", "glob.glob"})
_READER_METHODS = frozenset({"read_csv", "imread", "read_image"})


def _checks_type_of_x(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    x = fn.args.args[0].arg if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and fn.args.args else None
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "isinstance"
               and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == x for n in ast.walk(fn))


def _dotted(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        head = _dotted(func.value)
        return None if head is None else f"{head}.{func.attr}"
    return None


def _gist(code: str) -> str | None:
    """The code's statements without docstrings, each distinct top-level statement once: what runs."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (*DEFS, ast.Module)) and isinstance(body, list) and len(body) > 1 \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:]
    return "\n".join(dict.fromkeys(ast.dump(stmt) for stmt in tree.body))


def unavailable_import(tree: ast.Module, live: set[str]) -> str | None:
    """The first import that fails here (outside a `try` that catches it and outside functions that
    never run), as a sentence."""
    skipped = _guarded_imports(tree) | _dead_imports(tree, live)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _importable(alias.name):
                    return f"the reply imports {alias.name}, which is not available here ({_OFFERED})"
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                return "the reply has a relative import (`from .`), and its code is a single file"
            module = node.module or ""
            if not _importable(module):
                return f"the reply imports from {module}, which is not available here ({_OFFERED})"
            absent = [a.name for a in node.names if not _has_name(module, a.name)]
            if absent:
                return f"the reply imports {', '.join(absent)} from {module}, which has no such name"
    return None


def missing_attribute(tree: ast.Module, live: set[str]) -> str | None:
    """The first `module.name` in code that runs, of a checked module imported as a module, that
    the module does not have here (scipy.misc.imresize, np.float: removed), as a sentence."""
    modules = _imported_modules(tree)
    running = [stmt for stmt in tree.body if not isinstance(stmt, DEFS) or stmt.name in live]
    for attr in (n for stmt in running for n in ast.walk(stmt) if isinstance(n, ast.Attribute)):
        dotted = _dotted(attr)
        if dotted is None or not isinstance(attr.ctx, ast.Load) or dotted.split(".")[0] not in modules:
            continue
        head, *parts = dotted.split(".")
        where = modules[head]
        obj: object = importlib.import_module(where)
        for part in parts:
            obj = _attribute(obj, where, part)
            if obj is None:
                return f"the reply uses {dotted}, but {where} has no {part} here (removed or never there)"
            if not inspect.ismodule(obj):
                break
            where = obj.__name__
    return None


def _imported_modules(tree: ast.Module) -> dict[str, str]:
    """The names bound to a checked module (`import numpy as np`, `import scipy.ndimage`, `from
    sklearn import preprocessing`): name -> module."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in CHECKED_FROM and _importable(a.name):
                    out[bound_name(a)] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in CHECKED_FROM:
            for a in node.names:
                if a.name != "*" and _importable(f"{node.module}.{a.name}"):
                    out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def bound_name(alias: ast.alias) -> str:
    """The name an import's alias binds (`import a.b` binds a)."""
    return alias.asname or alias.name.split(".")[0]


def _attribute(obj: object, module: str, name: str) -> object | None:
    """obj.name, or the submodule module.name; None when neither is there."""
    try:
        found: object = getattr(obj, name)
        return found
    except AttributeError:
        pass
    except Exception:  # noqa: BLE001 - a module's own __getattr__ failing is no verdict
        return obj
    try:
        with warnings.catch_warnings():   # scipy.misc: "deprecated and will be removed"
            warnings.simplefilter("ignore")
            return importlib.import_module(f"{module}.{name}")
    except ImportError:
        return None
    except Exception:  # noqa: BLE001
        return obj


def unknown_keyword(tree: ast.Module, live: set[str]) -> str | None:
    """The first call, in code that runs, of a class or function imported from a checked module with
    a keyword argument it does not take (RandomForestClassifier(sample_weight=...)), as a sentence."""
    imported = {a.asname or a.name: (n.module or "", a.name) for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and not n.level and (n.module or "").split(".")[0] in CHECKED_FROM
                for a in n.names}
    running = [stmt for stmt in tree.body if not isinstance(stmt, DEFS) or stmt.name in live]
    for call in (n for stmt in running for n in ast.walk(stmt) if isinstance(n, ast.Call)):
        if not isinstance(call.func, ast.Name) or call.func.id not in imported:
            continue
        taken = _parameters(*imported[call.func.id])
        wrong = [k.arg for k in call.keywords if taken is not None and k.arg is not None and k.arg not in taken]
        if wrong:
            name = call.func.id
            fit = _parameters(*imported[name], method="fit") or set()
            hint = f" (pass it to fit(): {name}.fit takes it)" if wrong[0] in fit else ""
            return f"the reply calls {name}() with {wrong[0]}=, which {name}() does not take{hint}"
    return None


def _parameters(module: str, name: str, method: str | None = None) -> set[str] | None:
    """The keyword names module.name (or its method) takes; None: any, or unknown."""
    try:
        obj = getattr(importlib.import_module(module), name)
        if method is not None:
            obj = getattr(obj, method)
        params = inspect.signature(obj).parameters.values()
    except Exception:  # noqa: BLE001 - not importable, no signature: no verdict
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY}


DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def reachable(tree: ast.Module, roots: set[str], module_level: bool = True) -> set[str]:
    """The module's functions and classes that the roots (and its module-level statements) name."""
    defs = {n.name: n for n in tree.body if isinstance(n, DEFS)}
    todo = [name for name in roots if name in defs]
    todo += [n.id for stmt in tree.body if module_level and not isinstance(stmt, DEFS) for n in ast.walk(stmt)
             if isinstance(n, ast.Name) and n.id in defs]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [n.id for n in ast.walk(defs[name]) if isinstance(n, ast.Name) and n.id in defs]
    return seen


def _dead_imports(tree: ast.Module, live: set[str]) -> set[int]:
    return {id(n) for d in tree.body if isinstance(d, DEFS) and d.name not in live
            for n in ast.walk(d) if isinstance(n, ast.Import | ast.ImportFrom)}


_OFFERED = "the Packages section lists what is installed"


def _guarded_imports(tree: ast.Module) -> set[int]:
    """ids of the import statements inside a `try` whose handlers catch a failed import."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt)
                       if isinstance(n, ast.Import | ast.ImportFrom))
    return out


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names)


def _importable(module: str) -> bool:
    """Whether `module` can be imported here. A dotted name's parent is imported to find it, so the
    full name is looked up only under the checked modules: a reply's import never makes this
    process import an arbitrary installed package (only its top-level name is looked up)."""
    top = module.split(".")[0]
    if not top:
        return False
    try:
        return importlib.util.find_spec(module if top in CHECKED_FROM else top) is not None
    except (ImportError, ValueError):
        return False


def _has_name(module: str, name: str) -> bool:
    """False only when a checked module is known to lack the name (a submodule counts as a name)."""
    if name == "*" or module.split(".")[0] not in CHECKED_FROM:
        return True
    try:
        if hasattr(importlib.import_module(module), name):
            return True
        return importlib.util.find_spec(f"{module}.{name}") is not None
    except Exception:  # noqa: BLE001 - a module that fails to import here is not the reply's flaw
        return True
