"""Models: power P(f) (ridge point), time t(f), energy per unit of work and its optimum.

Pure functions of measured points; no device access.
"""
