"""`python -m befair_tui.cli ...`: the same as the `befair` command (used for detached runs)."""
import sys

from befair_tui.cli import main

sys.exit(main())
