"""The circuits study: which edges of SmolLM2 carry pronoun agreement, and how faithful is that subgraph?"""
