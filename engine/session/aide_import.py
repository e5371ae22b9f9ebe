"""Moved to engine.imports.aide (one module per import source). This name stays until every
caller has moved: it is the same module object, so attributes read or patched through either
name are the same."""
from __future__ import annotations

import sys

from engine.imports import aide as _aide
from engine.imports.aide import (  # noqa: F401  (re-exported)
    CODER, OUTPUT_KEEP, _TolerantLoader, find_journal, import_aide, load_aide_config,
)

sys.modules[__name__] = _aide
