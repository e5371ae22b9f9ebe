"""The agent's environment: what a pipeline can import, against what its prompt promises.

Pipelines run with this Python (inside the sandbox), so what is installed here is what the agent
has. Under befair's own protocol the prompt lists exactly that (engine.coders.llm.prompts
`environment_text`). Under the be-fair protocol the prompt is AIDE's, byte for byte, and says of
its package list "all packages are already installed!": those packages come with the opt-in
extra `befair[agent]`, and a be-fair session refuses to start without them.
"""
from __future__ import annotations

from importlib import metadata

from engine.errors import BefairError

# AIDE's list (engine.coders.llm.prompts_be_fair.AIDE_PACKAGES) by distribution name.
BE_FAIR_PACKAGES = ("numpy", "pandas", "scikit-learn", "statsmodels", "xgboost", "lightgbm", "torch", "torchvision",
                    "torch-geometric", "bayesian-optimization", "timm")
INSTALL_COMMAND = "pip install 'befair[agent]'   (in a checkout: .venv/bin/pip install -e '.[agent]')"


def missing(packages: tuple[str, ...] = BE_FAIR_PACKAGES) -> list[str]:
    out = []
    for name in packages:
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            out.append(name)
    return out


def require_be_fair_packages() -> None:
    """Raise (one line, with the install command) when a package AIDE's prompt names is absent."""
    absent = missing()
    if absent:
        one = len(absent) == 1
        raise BefairError(f"--protocol be-fair tells the agent, in AIDE's words, that {', '.join(absent)} "
                          f"{'is' if one else 'are'} installed, and {'it is' if one else 'they are'} not: "
                          f"install them with {INSTALL_COMMAND}")
