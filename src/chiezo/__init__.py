"""Chiezo: an offline knowledge base for AI."""

__version__ = "0.1.0"
