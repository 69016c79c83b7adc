"""What attention heads specialise in: six relations scored on every head of each packaged model.

``study.py`` states the hypothesis and metric and runs the study; ``inputs.py`` makes the random sequences and
holds the coreference sentences, ``scores.py`` scores every head, ``specialisation.py`` compares the scores
across heads, and ``report.py`` writes what they found.
"""
