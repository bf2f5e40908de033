"""Source kinds: each turns some input into a stream of Doc records for the builder.

The kinds are ``SourceKind`` objects registered in store/kinds.py (``kinds()``,
``kind_named(name)``); each lives in its own module here.
"""
