"""The steering study: pronoun-agreement directions added back to the stream (``interp study steering``)."""
