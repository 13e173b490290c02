"""Bytes of `__consumer_offsets` records -> typed, frozen records (pure Python: no Spark, no I/O)."""
