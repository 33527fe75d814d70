"""Algorithms: pure losses and hyperparameter dataclasses; no Ray here."""
