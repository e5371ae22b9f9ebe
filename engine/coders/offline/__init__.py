"""The offline coder: the embedded default agent, a SIMULATED agent labelled as such everywhere.

    coder.py      OfflineCoder: draft, improve, debug and review, as the study's agents did
    engine/offline_grammar.py    what a pipeline is made of (its components and their choices), in words too
    guidance.py   the human's guidance read as component choices, answered in plain words
    clinical.py   a dermatologist's plain words (goals, checks, data concerns) as component directions
    sampling.py   how a draft is sampled, an improvement made, a failing run lightened
    composer.py   a component choice composed into a runnable solution.py from templates/
    templates/    the pieces of every pipeline, as real Python files
"""
from engine.coders.offline.coder import BUG_FIXES, BUG_WEIGHTS, LABEL, OfflineCoder, detect_device
from engine.coders.offline.composer import render
from engine.offline_grammar import (
    BUGS,
    FAIRNESS,
    FAIRNESS_NAMES,
    LEVELS,
    MODEL_NAMES,
    MODELS,
    Compute,
    components_from_code,
    default_components,
    describe,
    fit_to,
    injected_failure,
    normalise,
    uses_skin_tone,
    without_injected_failure,
)
from engine.coders.offline.guidance import Directive, apply_directive, parse_guidance, satisfied
from engine.coders.offline.sampling import level_profile, lighten, mutate_one, sample_draft

__all__ = [
    "BUGS", "BUG_FIXES", "BUG_WEIGHTS", "FAIRNESS", "FAIRNESS_NAMES", "LABEL", "LEVELS", "MODELS", "MODEL_NAMES",
    "Compute", "Directive", "OfflineCoder", "apply_directive", "components_from_code", "default_components",
    "describe", "detect_device", "fit_to", "injected_failure", "level_profile", "lighten", "mutate_one", "normalise",
    "parse_guidance", "render", "sample_draft", "satisfied", "uses_skin_tone", "without_injected_failure",
]
