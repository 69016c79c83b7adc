"""Why attention divides its scores by sqrt(d_k): a Monte Carlo over d_k and the trained models' scores.

``study.py`` states the hypothesis and metric and runs the study; ``montecarlo.py`` draws and measures the
random scores, ``trained.py`` the packaged models' scores, and ``report.py`` writes what they found.
"""
