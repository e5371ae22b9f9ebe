"""The scaffold: befair writes the parts of a pipeline that a small model gets wrong, the model
writes its design.

The scaffold (engine/coders/llm/templates/scaffold.py) reads the data, splits it, prints the metric
line, saves the model and defines predict(folder); the model's reply holds features(X) and
train(X, y, skin_tone) (and the imports and helpers they need), which `assemble` puts where the
scaffold's marker line is. The node's code is the whole assembled file: it runs, is reviewed and
is measured as any other pipeline.

What the reply may do is left open: features() returns rows (flattened) or, with `FLATTEN = False`,
any shape (the images themselves for a CNN); train() gets those features, the labels and each
image's skin_tone value and returns any model with predict_proba(features) -> (n, 2) that joblib
can save, or a torch nn.Module (one or two logits per image), which the scaffold wraps
(`_TorchModel` in the template) and saves with joblib. What it rules out is RULES_OUT: nothing can
use an image's skin tone when predicting, the validation split is the scaffold's, the images come
resized to squares. The prompt's text names no intervention and nothing of the study's concern
(the instruction level alone does); WORDING_VERSION records which wording an agent saw.

Off by default (`--scaffold on`, or `scaffold = true` in the LLM settings file; `befair llm check`
recommends it for models under 7B parameters), and under befair's own protocol only: the be-fair
protocol's prompts stay AIDE's, byte for byte.

Why: a 1.5B coder writing whole files produced 36 pipelines and none ran to a measurement
(guessed file names, removed APIs, functions that do not exist). Shown a working pipeline, or a
working example reply, it handed that back, unchanged or reworded: a node measured as the
model's would have been ours. So the prompt shows the shape of a reply only (the two signatures,
bodies left to write), and a reply that leaves them unwritten is asked again (`unusable`).
"""
from __future__ import annotations

import ast
import builtins
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.coders.llm import reply_flaws, reply_rules
from engine.coders.llm.reply_rules import RuleHit

TEMPLATES = Path(__file__).parent / "templates"
MARKER = "# >>> features(X) and train(X, y, skin_tone) go here <<<"
OWN_PARTS = ("features", "train")
# names the scaffold defines: a reply that redefines them is not allowed to replace them
FIXED = frozenset({"INPUT", "WORKING", "load_image", "load_training_data", "predict", "_Rows",
                   "_one_row_per_image", "_written_features", "_TorchModel", "_as_predictor"})
SMALL_MODEL_PARAMS = 7e9      # below this, `befair llm check` recommends the scaffold
# the day the text the prompt shows of the scaffold last changed (FRAME_TEXT, the shown scaffold, the
# example, RESPONSE_FORMAT, GUIDELINE, packages_text, ask_again): a session records which its agent saw
WORDING_VERSION = "2026-11-25"
# what a pipeline cannot do inside the scaffold (shown on the setup screen and in the README)
RULES_OUT = (
    "Inside the scaffold nothing can depend on an image's skin tone when predicting (no per-group "
    "thresholds, calibration or models: predict(folder) has the images only), the validation split is "
    "befair's (80/20, stratified on the label), and the images reach features() as SIZE x SIZE squares."
)

FRAME_TEXT = (
    "Your code runs inside this scaffold. The scaffold reads the data, splits it, prints the "
    "metric, saves the model and defines predict(folder); you write the two functions it calls, "
    "features(X) and train(X, y, skin_tone), which go where the marked line is. Shown abridged: "
    "the scaffold's helpers are named in comments."
)
# what the prompt shows of the scaffold: the loaders and the saving helper as a comment each, what
# they give (a small model shown load_training_data's `for name in df["image_name"]` copies it into
# features(), as X["image_name"]; shown defs with `...` bodies, it writes those bodies instead of its
# own functions), and the wrapping of features() said in a comment (shown `_Rows`, it copies it)
HIDDEN = ("load_image", "load_training_data", "_as_predictor")
LEFT_OUT = ("_Rows", "_one_row_per_image", "_TorchModel")
WRAPPING_NOTE = ("# features() is then wrapped: what it returns becomes float32, one flat row per image "
                 "(FLATTEN = False keeps its shape)")
EXAMPLE_TEXT = (
    "The shape of your reply's code (the design, the imports and the bodies are yours to write):"
)
RESPONSE_FORMAT = (
    "Your response should be a brief outline of your proposed design in natural language (3-5 "
    "sentences), followed by a single markdown code block (wrapped in ```python ... ```) that holds "
    "only the imports your code needs, `def features(X):` and `def train(X, y, skin_tone):`, and any "
    "helper functions, classes or settings (SIZE, FLATTEN) they use. Do not repeat the rest of the "
    "scaffold: it is added around your code."
)
GUIDELINE = [
    "features(X) takes the images as the scaffold's load_image() made them: one float32 numpy array of "
    "shape (n, SIZE, SIZE, 3), values 0-1, already loaded and resized (not PIL images, not file names, "
    "not the CSV's columns). It returns the model's input for them: the scaffold makes it float32 and "
    "one flat row per image, or keeps its shape (the images themselves, for instance) when your code "
    "sets `FLATTEN = False`.",
    "train(X, y, skin_tone) gets features() of the training images (already computed: use X as it is), "
    "y (1: malignant, 0: not) and the CSV's skin_tone value of each image (1-6; 0: unknown). It returns "
    "the fitted model: an object with `predict_proba(features(X))` giving an (n, 2) array that joblib "
    "can save (a scikit-learn estimator or Pipeline, or a class of yours), or a torch nn.Module that "
    "takes features() as a float32 tensor and gives one logit per image, (n,) or (n, 1), or two, "
    "(n, 2). Define your classes at module level, so that the model can be saved.",
    "predict(folder) has the images only: features() cannot use skin_tone, y or anything else that "
    "exists only while training.",
    "To change the image size, set `SIZE = <pixels>` in your code.",
]


@dataclass(frozen=True)
class Scaffold:
    code: str       # the scaffold, with its marker line
    example: str    # the shape of a reply's code: the two functions' signatures, bodies left to write

    @functools.cached_property
    def shown(self) -> str:
        """The scaffold as the prompt shows it: the loaders, the saving helper and the wrapping of
        features() said in a comment each, its private classes left out (HIDDEN, LEFT_OUT)."""
        lines = self.code.split("\n")
        for node in reversed(ast.parse(self.code).body):
            first, last = node.lineno - 1, node.end_lineno or node.lineno
            if isinstance(node, ast.FunctionDef) and node.name in HIDDEN:
                lines[first:last] = [_said(node)]
            elif isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in LEFT_OUT:
                del lines[first:last + 2]    # with the blank lines after it
            elif isinstance(node, ast.Assign) and "_one_row_per_image" in ast.unparse(node.value):
                lines[first:last] = [WRAPPING_NOTE]
        return "\n".join(lines)

    def written(self, assembled: str) -> str | None:
        """The reply's part of a pipeline that `assemble` made (its imports, functions, classes and
        constants), as a debug or improve prompt shows it: the whole file repeats the scaffold, whose
        loader a small model copied into features(). None: the code is not this scaffold's."""
        head, tail = self.code.split(MARKER, 1)
        lines = head.rstrip("\n").split("\n")
        last_import = max((i for i, line in enumerate(lines) if line.startswith(("import ", "from "))), default=-1)
        before, after = "\n".join(lines[:last_import + 1]) + "\n", "\n".join(lines[last_import + 1:])
        future = ""
        while assembled.startswith("from __future__") and not assembled.startswith(before):
            line, assembled = assembled.split("\n", 1)
            future += line + "\n"
        if not assembled.startswith(before) or not assembled.endswith(tail) or after not in assembled:
            return None
        rest = assembled[len(before):len(assembled) - len(tail)]
        imports, body = rest.split(after, 1)
        return (future + imports.strip() + "\n\n\n" + body.strip()).strip() + "\n"

    def unwritten(self, reply_code: str) -> RuleHit | None:
        """The rule `unwritten-parts`: a reply that leaves features() or train() unwritten cannot
        go into the scaffold (it is asked again). A reply that does not parse is not caught here:
        running it shows the model its SyntaxError."""
        try:
            tree = ast.parse(reply_code)
        except SyntaxError:
            return None
        written = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not _placeholder(n)
                   and not _is_wrapper(n)}
        missing = [f"{name}()" for name in OWN_PARTS if name not in written]
        if not missing:
            return None
        return RuleHit(reply_rules.UNWRITTEN.id, f"the reply did not write {' and '.join(missing)}")

    def check(self, reply_code: str, failed: str | None = None) -> RuleHit | None:
        """The first reply rule (engine.coders.llm.reply_rules) the reply hits, put into the scaffold,
        or None. `failed`: for a debug reply, the code that failed (handing it back is a hit)."""
        return self.unwritten(reply_code) or reply_rules.first_hit(reply_code, self.assemble(reply_code), FIXED, failed)

    def unusable(self, reply_code: str) -> str | None:
        """The message of `unwritten`, or None."""
        hit = self.unwritten(reply_code)
        return hit.message if hit else None

    def flaw(self, reply_code: str, failed: str | None = None) -> str | None:
        """The message of the first rule after `unwritten-parts` that the reply hits, or None."""
        hit = reply_rules.first_hit(reply_code, self.assemble(reply_code), FIXED, failed)
        return hit.message if hit else None

    def assemble(self, reply_code: str) -> str:
        """The pipeline: the scaffold with the reply's imports after its own, and the reply's
        functions, classes and module-level values (`SIZE = 64`, `MEAN = np.array([...])`) at the
        marker (a `from __future__` import first in the file: Python takes it nowhere else). Anything
        else in the reply (a copy of the scaffold's own functions or its data loading, a `__main__`
        block, calls at module level) is left out. A reply that does not parse goes in whole, so
        that running it shows the model its SyntaxError."""
        head, tail = self.code.split(MARKER, 1)
        try:
            imports, body = _split_reply(reply_code, given=_bound_names(head))
        except SyntaxError:
            imports, body = [], [reply_code.strip()]
        lines = head.rstrip("\n").split("\n")
        last_import = max((i for i, line in enumerate(lines) if line.startswith(("import ", "from "))), default=-1)
        future = [i for i in imports if i.startswith("from __future__")]   # Python takes them first only
        lines[last_import + 1:last_import + 1] = [i for i in imports if i not in future]
        lines[:0] = future
        return "\n".join(lines) + "\n\n\n" + "\n\n\n".join(body) + "\n" + tail


# the name to import, where it is not the distribution's
IMPORT_NAMES = {"scikit-learn": "sklearn", "pillow": "PIL", "opencv-python": "cv2", "scikit-image": "skimage"}
# packages a model may reach for: said to be missing when they are
OFTEN_TRIED = ("tensorflow", "keras", "timm", "xgboost", "lightgbm", "opencv-python", "scikit-image")


def packages_text(versions: dict[str, str]) -> str:
    """What a scaffolded reply may import: every package of `versions` (what is installed,
    engine.coders.llm.prompts.installed_versions), the often-tried ones that are not, and where
    training runs."""
    listed = [f"{dist} {version}" + (f" (import {IMPORT_NAMES[dist]})" if dist in IMPORT_NAMES else "")
              for dist, version in versions.items()]
    missing = [dist + (f" ({IMPORT_NAMES[dist]})" if dist in IMPORT_NAMES else "")
               for dist in OFTEN_TRIED if dist not in versions]
    text = "Installed packages, and only these: " + ", ".join(listed) + "."
    if missing:
        text += " Not installed: " + ", ".join(missing) + "."
    if "torch" in versions:
        text += (" Use the GPU when torch.cuda.is_available(), otherwise the CPU (the scaffold moves a torch "
                 "module to the CPU to save it).")
    return text + " There is no internet access: nothing can be downloaded (no pretrained weights)."


def ask_again(why: str | None) -> str:
    """The note added to the prompt after a reply the scaffold cannot take (why=None: no code)."""
    said = f"{why[0].upper()}{why[1:]}" if why else "The last reply held no ```python code block"
    return (f"Note: {said.replace('The reply', 'The last reply')}, so it could not be used. Write both "
            "functions in full, `def features(X):` and `def train(X, y, skin_tone):`, in one ```python "
            "code block with their imports.")


def with_note(messages: list[dict[str, Any]], why: str | None) -> list[dict[str, Any]]:
    """The first prompt again, its last message ending with what the last reply lacked."""
    *head, last = messages
    return [*head, {**last, "content": f"{str(last['content']).rstrip()}\n\n{ask_again(why)}\n"}]


def _said(fn: ast.FunctionDef) -> str:
    """A scaffold function as one comment line: its call and its docstring (the tool's name, befair,
    is not said: it reads as a hint)."""
    doc = (ast.get_docstring(fn) or "").split("\n")[0].rstrip(".")
    if doc[1:2].islower():     # "One image as", not "X: images"
        doc = doc[:1].lower() + doc[1:]
    return f"# {fn.name}({', '.join(a.arg for a in fn.args.args)}) (the scaffold's, not shown) gives {doc}"


def _split_reply(code: str, given: frozenset[str]) -> tuple[list[str], list[str]]:
    """(import statements, definitions) of a reply, as the model wrote them, less the imports of
    names the scaffold already imports (`given`)."""
    imports: list[str] = []
    body: list[str] = []
    bound = set(given)
    for node in ast.parse(code).body:
        text = ast.get_source_segment(code, node) or ""
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports.extend(_new_imports(node, text, given))
            bound |= {reply_flaws.bound_name(a) for a in node.names}
        elif (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name not in FIXED
              and not _is_wrapper(node)):
            body.append(_with_decorators(code, node, text))
            bound.add(node.name)
        elif _is_setting(node, frozenset(bound)):
            body.append(text)
            bound |= _assigned(node)
    return imports, body


def _bound_names(code: str) -> frozenset[str]:
    """The names the import statements of `code` bind."""
    return frozenset(reply_flaws.bound_name(a) for node in ast.parse(code).body
                     if isinstance(node, ast.Import | ast.ImportFrom) for a in node.names)


def _new_imports(node: ast.Import | ast.ImportFrom, text: str, given: frozenset[str]) -> list[str]:
    """The statement as written, or without the names the scaffold imports already: a small model
    re-imported them from the wrong module (`from sklearn.ensemble import LogisticRegression`)."""
    kept = [a for a in node.names if reply_flaws.bound_name(a) not in given or a.name == "*"]
    if len(kept) == len(node.names):
        return [text]
    if not kept:
        return []
    if isinstance(node, ast.Import):
        return [ast.unparse(ast.Import(names=kept))]
    return [ast.unparse(ast.ImportFrom(module=node.module, names=kept, level=node.level))]


def _with_decorators(code: str, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, text: str) -> str:
    if not node.decorator_list:
        return text
    lines = code.splitlines()
    first = min(d.lineno for d in node.decorator_list)
    return "\n".join(lines[first - 1:node.lineno - 1]) + "\n" + text


def _is_setting(node: ast.stmt, bound: frozenset[str]) -> bool:
    """`NAME = value` (or `NAME: type = value`, `MEAN, STD = ...`) built from literals, imported
    modules and the reply's own earlier names (`SIZE = 64`, `MEAN = np.array([0.7, 0.6, 0.5])`,
    `transform = T.Compose([...])`): a value the reply's functions use. Not one that reads a file
    (a copy of the scaffold's loading) or needs a name only the scaffold's own code binds."""
    value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
    if value is None or not _assigned(node) or _assigned(node) & FIXED:
        return False
    names = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
    if names - bound - BUILTINS:
        return False
    return not any(isinstance(n, ast.Constant) and isinstance(n.value, str) and _looks_like_a_path(n.value)
                   for n in ast.walk(value))


def _assigned(node: ast.stmt) -> set[str]:
    """The names an assignment binds, when it binds names only (`A = B = 1`, `A, B = ...`, `A: int = 1`);
    otherwise (`X[0] = 1`, `obj.a = 1`) none."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    names = [n for t in targets for n in (t.elts if isinstance(t, ast.Tuple | ast.List) else [t])]
    ids = [n.id for n in names if isinstance(n, ast.Name)]
    return set(ids) if names and len(ids) == len(names) else set()


BUILTINS = frozenset(dir(builtins)) - {"open", "exec", "eval", "input", "__import__", "compile"}


def _looks_like_a_path(text: str) -> bool:
    return "/" in text or "\\" in text or text.lower().endswith((".csv", ".jpg", ".png", ".joblib", ".pkl", ".pt"))


def _is_wrapper(node: ast.stmt) -> bool:
    """A copy of the scaffold's own flattening of features() (this scaffold's `_one_row_per_image`
    or its inner `rows` with `_Rows`, or the earlier `_written_features`): not the model's
    features(), and kept it would call itself or a name it does not have."""
    text = ast.unparse(node)
    return any(name in text for name in ("_written_features", "_one_row_per_image", "_Rows"))


def _placeholder(node: ast.FunctionDef) -> bool:
    """A body left to write: only a docstring, `...`, `pass` or `raise NotImplementedError`."""
    body = node.body[1:] if node.body and _is_docstring(node.body[0]) else node.body
    return all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                          and s.value.value is Ellipsis)
               or (isinstance(s, ast.Raise) and "NotImplementedError" in ast.unparse(s)) for s in body)


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


@functools.lru_cache(maxsize=1)
def load() -> Scaffold:
    return Scaffold(code=(TEMPLATES / "scaffold.py").read_text(encoding="utf-8"),
                    example=(TEMPLATES / "scaffold_example.py").read_text(encoding="utf-8"))
