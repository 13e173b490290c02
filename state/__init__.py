"""Decoded records -> the per-group GroupMetadata mirror (pure Python: no Spark, no clock)."""
