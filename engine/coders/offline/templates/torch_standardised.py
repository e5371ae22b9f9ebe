"""Whether a PyTorch pipeline's images are already standardised (then to_tensor leaves them be)."""
from choices import CHOICE_STANDARDISED

# --- solution.py ---
STANDARDISED = CHOICE_STANDARDISED
