"""Simulated boards: a supported backend (``sim:<board>``), and the test bed for the rest."""
