"""The ``chiezo`` command (main.py) and its command groups."""
