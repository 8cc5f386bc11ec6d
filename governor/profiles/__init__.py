"""Profiles: one versioned, human-readable JSON file per board (models, raw points, caches)."""
