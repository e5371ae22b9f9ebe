"""The audit's vocabulary: the names and words it recognises in a pipeline's code.

Skin-tone column keys, metric and loss functions, the words of an identifier that say "skin-tone
group", "worst group" or "weight", and the library calls whose meaning the analysis knows (splits,
frame methods, samplers, concatenations).
"""
from __future__ import annotations

import functools
import re

SKIN_KEYS = frozenset({
    "skin_tone", "fitzpatrick_scale", "alternative_skin_tone", "fitzpatrick", "fitzpatrick_centaur",
    "skin_type", "skin_binary", "fitzpatrick_type", "fst", "skintone", "skin_color", "skin_colour",
})
NON_NEOPLASTIC = "non-neoplastic"
METRIC_FUNCS = frozenset({
    "roc_auc_score", "roc_curve", "auc", "accuracy_score", "f1_score", "precision_score",
    "recall_score", "balanced_accuracy_score", "average_precision_score", "auroc", "binary_auroc",
    "confusion_matrix", "compute_auc", "calculate_auc", "BinaryAUROC", "AUROC", "precision_recall_curve",
    "log_loss", "brier_score_loss", "matthews_corrcoef",
})
LOSS_HINTS = ("loss", "criterion", "entropy", "bce", "focal", "nll")
LOGGERS = frozenset({"print", "info", "debug", "warning", "error", "write", "log", "echo", "set_description",
                     "set_postfix", "add_scalar", "pprint"})

# identifier words that say "skin-tone group" (names such as tones, skin_group, fst_bin, sens_attr)
GROUP_WORDS = frozenset({"skin", "tone", "tones", "skintone", "skintones", "fitz", "fitzpatrick", "fst",
                         "group", "groups", "grp", "grps", "subgroup", "subgroups", "sensitive", "sens"})
NOT_GROUP_WORDS = frozenset({"param", "params", "fold", "kfold", "folds", "shuffle", "split", "patient",
                             "lesion", "image", "by"})
WORST_WORDS = frozenset({"worst", "minimax", "pareto", "maximin"})
WEIGHT_WORDS = frozenset({"weight", "weights", "wt", "wts", "w", "sw"})
# calls whose result is not a skin-derived value even when an argument is (splits, frames, loaders)
NON_PROPAGATING = frozenset({
    "train_test_split", "split", "DataFrame", "DataLoader", "read_csv", "StratifiedKFold", "KFold",
    "GroupKFold", "StratifiedGroupKFold", "ShuffleSplit", "StratifiedShuffleSplit", "fit", "print",
    "WeightedRandomSampler", "len",
})
# dataframe methods whose result depends on the receiver only (not on the arguments)
FRAME_METHODS = frozenset({
    "assign", "merge", "join", "drop", "rename", "reset_index", "copy", "set_index", "sort_values",
    "sort_index", "dropna", "query", "sample", "head", "tail", "drop_duplicates", "reindex", "filter",
})
# methods that keep "these are the rows of a group"
ROW_METHODS = frozenset({
    "copy", "reset_index", "sample", "head", "tail", "drop_duplicates", "dropna", "to_numpy", "tolist",
    "values", "index", "sort_values", "assign", "astype",
})
MIN_FUNCS = frozenset({"min", "amin", "nanmin"})
SELECT_FUNCS = frozenset({"max", "argmax", "nanargmax", "sorted", "sort_values", "idxmax", "nlargest",
                          "argsort", "sort"})
CONCAT_FUNCS = frozenset({"concat", "cat", "vstack", "concatenate", "append", "hstack", "ConcatDataset",
                          "row_stack", "stack"})
SPLIT_FUNCS = frozenset({"split", "train_test_split"})
MUTATORS = frozenset({"append", "extend", "add", "insert", "update", "setdefault", "appendleft"})
# the words of a validation / test frame's name (resampling its rows is a bootstrap of a metric)
EVAL_WORDS = frozenset({"val", "valid", "validation", "test", "eval", "evaluation", "holdout", "dev", "va"})
# calls that give a boolean row mask
CONDITION_CALLS = frozenset({"isin", "notna", "notnull", "isna", "isnull", "between", "eq", "ne", "gt", "ge",
                             "lt", "le", "contains", "startswith", "endswith", "apply", "map", "any", "all",
                             "exists", "isfile"})


@functools.lru_cache(maxsize=8192)
def identifier_words(identifier: str) -> frozenset[str]:
    """snake_case / camelCase identifier -> lower-case words (skinToneGroup -> skin, tone, group)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", identifier or "")
    return frozenset(w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w)


def groupish_identifier(identifier: str) -> bool:
    if identifier.strip().lower() in SKIN_KEYS:
        return True
    words = identifier_words(identifier)
    return bool(words & GROUP_WORDS) and not (words & NOT_GROUP_WORDS)


def worstish_identifier(identifier: str) -> bool:
    words = identifier_words(identifier)
    if words & WORST_WORDS:
        return True
    low = identifier.lower()
    return ("min" in words and bool({"group", "groups", "subgroup", "tone"} & words)) or low.startswith("min_group")


def weightish_identifier(identifier: str) -> bool:
    words = identifier_words(identifier)
    return bool(words & WEIGHT_WORDS) or identifier.lower().startswith("w_")


def is_skin_key(s: str) -> bool:
    return s.strip().lower() in SKIN_KEYS
