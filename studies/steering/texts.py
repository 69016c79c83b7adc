"""Texts of the steering study that are not agreement items: neutral text for the fluency cost, and prompts
to generate from.

The neutral prompts mention no person, so no pronoun is expected next and a steering vector for "she" rather
than "he" has nothing it should change there: the KL divergence from the unsteered next-token distribution
measures what steering costs elsewhere. They were written for this study.
"""

NEUTRAL = (
    "The river runs through the valley and",
    "Heavy rain fell all night, so the roads",
    "The recipe calls for two cups of flour and",
    "In winter the lake freezes and the",
    "The train to the coast leaves every hour from",
    "Most of the old houses on this street were built",
    "The museum opens at nine and closes",
    "A strong wind blew the leaves across the",
    "The price of bread rose again this year because",
    "The bridge was closed for repairs, and traffic",
    "The garden is full of roses in",
    "After the storm, the sky over the hills",
    "The library keeps its oldest maps in",
    "Water boils at a lower temperature on",
    "The market sells fresh fish every morning near",
    "Snow covered the mountains long before the",
)

CONTINUATIONS = (
    "Yesterday my neighbour knocked on the door and",
    "The doctor looked at the chart for a long time, then",
)
"""Prompts without an antecedent, generated from as they are (the study adds held-out agreement prompts)."""
