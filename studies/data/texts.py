"""The texts the study feeds a model for each item, and where the interesting words sit in them.

Substitution scoring (Trinh and Le 2018; Radford et al. 2019) replaces the pronoun by each candidate and
compares the two sentences' log-probabilities. A possessive pronoun (``his``, ``its``, ``their``, and ``her``
right after a conjunction, where it cannot be an object) becomes the candidate plus ``'s``; a determiner is
lower-cased inside the sentence and every substitution is capitalised at the start of a sentence.

A WinoGrande blank (``_``) is filled with the option exactly as written, as the benchmark intends (its
sentences carry their own determiners and ``'s``).

The question prompt appends `` In this sentence, "it" refers to the`` to the sentence and compares the
candidates' continuations (the candidate without its determiner when both share ``the``; otherwise the
candidate as written, after `` refers to``).

lm-eval-harness scores ``wsc273`` and ``winogrande`` by partial scoring with rules of its own
(:func:`lm_eval_texts`): the context is the text before the pronoun plus the option, with ``'s`` added after
``my``, ``his``, ``her``, ``our`` and ``their`` and a leading ``The``, ``A``, ``He`` ... lower-cased unless the
pronoun follows a full stop; the continuation is one space and the rest of the sentence, stripped. The
study computes that score next to its own, so its numbers can be set beside published ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from studies.data.items import ResolutionItem

POSSESSIVE = {"his", "its", "their"}
DETERMINERS = {"The", "A", "An", "This", "That", "These", "Those", "My", "Your", "Our"}
CLAUSE_WORDS = {"because", "so", "but", "although", "and", "when", "since", "while", "though", "if"}
LM_EVAL_POSSESSIVE = {"my", "his", "her", "our", "their"}
LM_EVAL_UPPER = {"A", "An", "The", "She", "He", "It", "They", "My", "His", "Her", "Their"}


@dataclass(frozen=True)
class Substitution:
    """A sentence with the pronoun replaced; ``[start, end)`` is the replacement's character span."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Continuation:
    """A scored text split as lm-eval-harness splits it: ``context`` then the scored ``continuation``."""

    context: str
    continuation: str

    @property
    def text(self) -> str:
        return self.context + self.continuation


@dataclass(frozen=True)
class QuestionPrompt:
    """``prefix`` ends right before the answer; ``answers[i]`` (with its leading space) names candidate i."""

    prefix: str
    answers: tuple[str, str]


def is_possessive(item: ResolutionItem) -> bool:
    """Whether the pronoun is a possessive (``his legs``) rather than an object (``comforted her``)."""
    word = item.pronoun.lower()
    if item.blank:
        return False
    if word in POSSESSIVE:
        return True
    if word != "her":
        return False
    before = item.sentence[: item.pronoun_char_offset].split()
    return not before or before[-1].strip(",;").lower() in CLAUSE_WORDS


def _at_sentence_start(text: str, offset: int) -> bool:
    head = text[:offset].rstrip()
    return not head or head[-1] in ".!?"


def candidate_in_context(candidate: str, text: str, offset: int) -> str:
    """``candidate`` as it reads at ``offset`` of ``text``: capitalised at a sentence start, else its
    determiner lower-cased ("The truck" -> "the truck"; names keep their capital)."""
    first, _, rest = candidate.partition(" ")
    if _at_sentence_start(text, offset):
        return candidate[:1].upper() + candidate[1:]
    if first in DETERMINERS and rest:
        return f"{first.lower()} {rest}"
    return candidate


def substitute(item: ResolutionItem, index: int) -> Substitution:
    """The sentence with the pronoun replaced by candidate ``index``.

    >>> from studies.data.load import load_items
    >>> item = load_items("winograd")[0]
    >>> substitute(item, 1).text
    'The truck passed the bicycle because the bicycle was much faster.'
    """
    s, start = item.sentence, item.pronoun_char_offset
    if item.blank:
        word = item.candidates[index]
        return Substitution(s[:start] + word + s[start + 1 :], start, start + len(word))
    word = candidate_in_context(item.candidates[index], s, start)
    if is_possessive(item):
        word += "'s"
    text = s[:start] + word + s[start + len(item.pronoun) :]
    return Substitution(text, start, start + len(word))


def lm_eval_option(item: ResolutionItem, index: int) -> str:
    """Candidate ``index`` as lm-eval-harness puts it in place of the pronoun (see the module docstring).

    >>> from studies.data.items import ResolutionItem
    >>> item = ResolutionItem(id="x", sentence="Tom hit Bob because his arm slipped.", pronoun="his",
    ...                       pronoun_char_offset=20, candidates=("The man", "Bob"), answer=0)
    >>> lm_eval_option(item, 0)
    "the man's"
    """
    option = item.candidates[index]
    if item.blank:
        return option
    if item.pronoun.lower() in LM_EVAL_POSSESSIVE:
        option += "'s"
    first = option.split()[0] if option.split() else option
    # lm-eval looks two characters back for a full stop (for a pronoun at 0 that index wraps, in theirs too)
    start_of_sentence = item.sentence[item.pronoun_char_offset - 2] == "." if item.sentence else False
    if not start_of_sentence and first in LM_EVAL_UPPER:
        option = option.replace(first, first.lower())
    return option


def lm_eval_texts(item: ResolutionItem, index: int) -> Continuation:
    """Context and continuation for candidate ``index`` as lm-eval-harness's wsc273 and winogrande tasks
    build them; trailing whitespace of the context moves into the continuation, as it does there."""
    context = item.sentence[: item.pronoun_char_offset] + lm_eval_option(item, index)
    continuation = " " + item.sentence[item.pronoun_end :].strip()
    stripped = context.rstrip()
    return Continuation(stripped, context[len(stripped) :] + continuation)


def question_prompt(item: ResolutionItem) -> QuestionPrompt:
    """The sentence followed by `` In this sentence, "<pronoun>" refers to the``, and the two answers.

    >>> from studies.data.load import load_items
    >>> q = question_prompt(load_items("winograd")[0])
    >>> q.prefix[-36:], q.answers
    ('In this sentence, "it" refers to the', (' truck', ' bicycle'))
    """
    firsts = [c.split(" ", 1) for c in item.candidates]
    shared_the = all(len(f) == 2 and f[0].lower() == "the" for f in firsts)
    base = f'{item.sentence} In this sentence, "{item.pronoun}" refers to'
    if shared_the:
        return QuestionPrompt(base + " the", (" " + firsts[0][1], " " + firsts[1][1]))
    answers = tuple(" " + candidate_in_context(c, base + " x", len(base) + 1) for c in item.candidates)
    return QuestionPrompt(base, answers)  # type: ignore[arg-type]


def sentence_end(text: str) -> tuple[int, int]:
    """Character span of the sentence's last character (its full stop, usually)."""
    end = len(text.rstrip())
    return end - 1, end
