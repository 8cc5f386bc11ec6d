"""Fakes at the lowest boundary the tests can reach (STYLE 14): real bindings run above them."""
