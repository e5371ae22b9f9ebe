"""A pipeline run as a script trains and reports; imported, it only defines predict()."""
from main import main

# --- solution.py ---
if __name__ == "__main__":
    main()
