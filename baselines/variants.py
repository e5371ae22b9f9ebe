"""The three expert pipelines (kept light: the CLI imports this without torch)."""

# variant -> the cleaning steps applied before training (engine.data.cleaning.clean variants)
VARIANTS: dict[str, tuple[str, ...]] = {
    "medfair": (),
    "medfair-dedup": ("dedup",),
    "medfair-filtered": ("dedup", "filtered"),
}
VARIANT_LABELS = {
    "medfair": "MEDFAIR",
    "medfair-dedup": "MEDFAIR-dedup",
    "medfair-filtered": "MEDFAIR-filtered",
}
