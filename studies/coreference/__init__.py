"""The pronoun-coreference study: how a model resolves a pronoun and which heads carry it."""
