"""Tuning: tile sizes (EATSS, analytic stencil/DOACROSS models) and thread-block sizes.

Pure computation over kernel descriptions and GPU resources; results are cached in profiles.
Imports nothing from ``runtime`` or ``cli``.
"""
