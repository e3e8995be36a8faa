"""Shared test helpers (imported as ``tests.helpers.*``; test modules never import each other)."""
