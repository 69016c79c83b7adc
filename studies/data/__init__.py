"""What the studies share: the data sets, reading them into validated items, twin pairs, and forward helpers.

A study imports from here, never from another study. ``load.py`` reads a shipped data set or a file of any
supported format (``formats.py``, ``benchmarks.py``) into items (``items.py``), fills in what can be derived
(``derive.py``), checks the rules (``rules.py``) and notes imperfect items (``notes.py``); ``twins.py`` pairs
twins; ``switch.py`` scores a twin pair by its switch sensitivity and bias (the primary measure wherever twins
are scored); ``texts.py`` builds the texts a model reads; ``spans.py`` finds each role in them and the answers'
tokens; ``pairs.py`` turns twin pairs into patchable clean and corrupt batches; ``forward.py`` runs batched
forwards. ``build.py`` writes the shipped JSONL files.
"""
