"""The application shell: the composition root (`mirror.Mirror`) and the commands (run, capture, decode)."""
