"""The HPD-Parsing model in PyTorch: config, checkpoint loading, modules, prompt and decoding.

Importing this package is cheap; torch and transformers load only in the modules that need them.
"""
