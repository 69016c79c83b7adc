"""Attention alone has no notion of order: permutation equivariance on random models, shuffling on trained ones.

``study.py`` states the hypothesis and metric and runs the study; ``random_models.py`` measures seeded random
models of every positional scheme, ``trained.py`` the packaged models under shuffling, and ``report.py``
writes what they found.
"""
