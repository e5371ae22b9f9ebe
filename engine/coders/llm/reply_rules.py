"""The reply checks as a registry: each `Rule` has an id, a scope and a message, and the coder
records which one a reply hit (the `check` of its llm_call event, with the reply's attempt).

A scaffolded reply (engine.coders.llm.scaffold) is checked before anything of it runs. A reply that
hits a rule is asked again with the rule's message as a note; when no reply is free of hits, the
last complete one runs, so that the model sees the error (engine.coders.llm.coder).

Scopes: "any" rules catch code that would fail whoever wrote it (it does not parse or compile, an
import or a name that is not there, a keyword a class does not take); "scaffold" rules catch a reply
that misreads the scaffold's contract (features(X) gets float arrays, predict(folder) has the
images alone); "debug" rules apply to a debug reply, which is given the code that failed.

`syntax` and `undefined-name` are pyflakes' findings (engine.coders.llm.reply_flakes); the other
checks are engine.coders.llm.reply_flaws'.
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from engine.coders.llm import reply_flakes as rp
from engine.coders.llm import reply_flaws as rf

Scope = Literal["any", "scaffold", "debug"]


@dataclass(frozen=True)
class Reply:
    """What a rule reads: the reply's code, the pipeline `assemble` made of it, and what runs."""
    code: str
    assembled: str
    tree: ast.Module              # the assembled pipeline, parsed
    live: set[str]                # the functions and classes that run (reachable from the scaffold)
    own: set[str]                 # the reply's own definitions, less the scaffold's fixed names
    failed: str | None = None     # a debug step: the code that failed
    flakes: tuple[Any, ...] = ()  # what pyflakes found in the assembled pipeline (reply_flakes.check)


@dataclass(frozen=True)
class Rule:
    id: str
    scope: Scope
    catches: str                  # what it catches and why (docs/llm.md lists them)
    check: Callable[[Reply], str | None]   # the message (the note sent with the prompt), or None


@dataclass(frozen=True)
class RuleHit:
    rule: str
    message: str

    def payload(self, attempt: int) -> dict[str, Any]:
        return {"rule": self.rule, "attempt": attempt, "message": self.message}


# checked in this order; the first hit is the reply's
RULES: tuple[Rule, ...] = (
    Rule("unavailable-import", "any", "an import that fails here, outside a try that catches it",
         lambda r: rf.unavailable_import(r.tree, r.live)),
    Rule("undefined-name", "any", "a name that running code uses and nothing binds (NameError), or that a "
         "function reads before assigning it (UnboundLocalError)",
         lambda r: rp.undefined_names(r.flakes, r.tree, r.live)),
    Rule("missing-attribute", "any", "module.name where the module has no such name here (removed or misspelt)",
         lambda r: rf.missing_attribute(r.tree, r.live)),
    Rule("unknown-keyword", "any", "a keyword argument a scikit-learn class or function does not take",
         lambda r: rf.unknown_keyword(r.tree, r.live)),
    Rule("pipeline-fit-keyword", "any", "Pipeline.fit given a keyword that names no step (scikit-learn refuses it)",
         lambda r: rf.pipeline_fit_keyword(r.tree, r.live)),
    Rule("features-reads-files", "scaffold", "features() opening files: it gets the images as an array, and "
         "the model file does not exist before train() has run", lambda r: rf.features_reads_files(r.tree, r.own)),
    Rule("x-indexed-by-name", "scaffold", "features() or train() reading X by a column name: X is an array",
         lambda r: rf.indexes_x_by_name(r.tree)),
    Rule("features-makes-pil-images", "scaffold", "features() handing X's float images to PIL, which takes bytes, "
         "or calling PIL methods on arrays", lambda r: rf.features_makes_pil_images(r.tree, r.own)),
    Rule("features-uses-training-names", "scaffold", "features() reading a name bound only while training: "
         "predict(folder) fails with a NameError", lambda r: rf.features_uses_training_names(r.assembled, r.tree,
                                                                                            r.own)),
    Rule("repeats-failed-code", "debug", "a debug reply that hands back the code that failed, unchanged: "
         "it would fail again the same way", lambda r: rf.repeats(r.assembled, r.failed) if r.failed else None),
)

# hits the coder records itself, before a reply reaches the rules above
SYNTAX = Rule("syntax", "any", "code that does not parse, or does not compile ('break' outside a loop, "
              "a repeated argument): a SyntaxError before anything runs", lambda r: None)
UNWRITTEN = Rule("unwritten-parts", "scaffold", "a reply that leaves features() or train() unwritten "
                 "(a copy of the scaffold's example or of the scaffold itself)", lambda r: None)
NO_CODE = Rule("no-code-block", "any", "a reply with no ```python code block", lambda r: None)

BY_ID: dict[str, Rule] = {rule.id: rule for rule in (NO_CODE, UNWRITTEN, SYNTAX, *RULES)}


def first_hit(reply_code: str, assembled: str, fixed: frozenset[str] = frozenset(),
              failed: str | None = None) -> RuleHit | None:
    """The first rule the reply, put into the scaffold as `assembled`, hits; None: it hits none.
    Only code that runs counts: the scaffold's, and the reply's functions and classes that it
    reaches from features() and train() (an unused helper's import or name is no hit). `fixed`:
    the names the scaffold defines, which the reply cannot replace."""
    if why := rp.does_not_parse(reply_code):
        return RuleHit(SYNTAX.id, why)
    flakes = rp.check(assembled)
    if flakes.syntax is not None:
        return None
    reply, tree = ast.parse(reply_code), ast.parse(assembled)
    if why := rp.does_not_compile(flakes.found, tree):
        return RuleHit(SYNTAX.id, why)
    own = {n.name for n in reply.body if isinstance(n, rf.DEFS)}
    roots = {n.name for n in tree.body if isinstance(n, rf.DEFS) and n.name not in own} | {"features", "train"}
    seen = Reply(reply_code, assembled, tree, rf.reachable(tree, roots), own - fixed, failed, flakes.found)
    for rule in RULES:
        if message := rule.check(seen):
            return RuleHit(rule.id, message)
    return None
