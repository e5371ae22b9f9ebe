"""The real data formats: Fitzpatrick17k and DDI column names, value sets and reference counts."""
from __future__ import annotations

FITZ_COLUMNS = (
    "md5hash",
    "fitzpatrick_scale",
    "fitzpatrick_centaur",
    "label",
    "nine_partition_label",
    "three_partition_label",
    "qc",
    "url",
    "url_alphanum",
)
# Columns a Fitzpatrick17k-format CSV must have; the others are filled with blanks when absent.
FITZ_REQUIRED = FITZ_COLUMNS[:6]  # md5hash .. three_partition_label
FITZ_SCALES = (-1, 1, 2, 3, 4, 5, 6)
THREE_PARTITIONS = ("non-neoplastic", "benign", "malignant")
NINE_PARTITIONS = {
    "inflammatory": "non-neoplastic",
    "genodermatoses": "non-neoplastic",
    "benign dermal": "benign",
    "benign epidermal": "benign",
    "benign melanocyte": "benign",
    "malignant epidermal": "malignant",
    "malignant melanoma": "malignant",
    "malignant cutaneous lymphoma": "malignant",
    "malignant dermal": "malignant",
}
QC_VALUES = (
    "1 Diagnostic",
    "2 Characteristic",
    "3 Wrongly labelled",
    "4 Other",
    "5 Potentially",
)

DDI_REQUIRED = ("DDI_file", "skin_tone", "malignant")
DDI_SKIN_TONES = (12, 34, 56)

# Reference counts of the real Fitzpatrick17k (DESIGN.md): fitzpatrick_scale x three partition.
FITZ_JOINT = {
    # scale: (non-neoplastic, benign, malignant)
    -1: (388, 74, 103),
    1: (2050, 444, 453),
    2: (3395, 671, 742),
    3: (2377, 475, 456),
    4: (2113, 367, 301),
    5: (1227, 159, 147),
    6: (530, 44, 61),
}
FITZ_ROWS = 16_577

DDI_GROUP_COUNTS = {12: 208, 34: 241, 56: 207}
DDI_MALIGNANT_COUNTS = {12: 49, 34: 74, 56: 48}
