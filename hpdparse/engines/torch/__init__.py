"""The torch engine: the HPD model in plain PyTorch (modeling, loading, decoding) and its engine.

Importing this package is cheap; torch and transformers load only in the modules that need them.
"""
