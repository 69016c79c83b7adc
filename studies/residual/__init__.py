"""The residual stream as a highway: write norms, logit lens and attribution, gradients through depth.

``study.py`` states the hypothesis and metric and runs the study; ``stacks.py`` measures gradients through
seeded random stacks with and without skip paths and norms, ``trained.py`` the writes, logit lens and
attribution of a trained model, and ``report.py`` writes what they found.
"""
