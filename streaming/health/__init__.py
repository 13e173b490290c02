"""Log offsets -> lag -> consumer health: lag tables and lookups, Burrow's window and rules."""
