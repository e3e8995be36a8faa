"""Synthetic documents with exact HPD ground truth, and the tiny HPD model trained on them."""
