"""Nightly regressions: the history store of measured runs and the check of the latest night."""
