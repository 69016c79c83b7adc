"""What attention buys over recurrence: recall across a distance, gradients to distant inputs, time.

``study.py`` states the hypothesis and metric and runs the study; ``task.py`` generates the recall task,
``models.py`` holds the LSTM and the transformer, ``training.py`` trains and measures them, ``timing.py``
times them against sequence length, and ``report.py`` writes what they found.
"""
