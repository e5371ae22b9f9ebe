"""The values a pipeline takes from its component choice. The composer (../composer.py) replaces
each CHOICE_* name in a template with the choice's value written as a Python literal; the values
here are only examples, so that the templates read (and lint) as the Python they are.

Templates also carry `# when: <flag>` tags: a tagged line is kept only where the flag holds (flags
joined by `and`, each may be negated with `not`), and the tag itself is dropped. The flags are
composer.FLAGS. Everything above a template's `# --- solution.py ---` line is context for the
reader and the linter, never copied into a pipeline.
"""
CHOICE_IMAGE_SIZE = 64            # image_size (pixels of the square resize)
CHOICE_STANDARDISED = False       # standardise (per-image z-score; a PyTorch pipeline then skips its own scaling)
CHOICE_C = 1.0                    # hp.C of a logistic regression
CHOICE_C_GRID = [0.1, 1.0, 10.0]  # the Cs a minimax logistic regression tries (hp.C among them)
CHOICE_MAX_ITER = 150             # hp.max_iter of gradient boosting
CHOICE_MAX_ITER_GRID = [50, 150, 300]  # the boosting rounds a minimax gradient boosting tries
CHOICE_LEARNING_RATE = 0.1        # hp.learning_rate of gradient boosting
CHOICE_MODEL = "cnn"              # model, as model.json names it
CHOICE_PRETRAINED = False         # ImageNet weights (a ResNet-18, where they are on disk)
CHOICE_LR = 0.002                 # hp.lr of a PyTorch model
CHOICE_EPOCHS = 4                 # hp.epochs
CHOICE_BATCH_SIZE = 64            # hp.batch_size
