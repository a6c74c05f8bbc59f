"""What kind of answer an instruction asks for: dense features that carry across prompt sources.

Hashed n-grams learn the words of the sources a model was trained on; an unseen source shares few
of them. These features name the *task* and the *requested size* instead, which read the same
whatever the source (the cue words are those of instruction-tuning sets: rewrite, classify,
explain, summarise, translate, list, write, code; "in one word", "list 10", "500 words",
"an essay", "yes or no"). Every value is in [0, 1] (or a small scaled log); one row per prompt.

Where a cue is looked for: task verbs in the instruction's ends (the first and last
`_END_CHARS` characters, where an instruction sits around pasted input); sizes anywhere in those
ends. A rewrite-like task (rewrite, paraphrase, correct, translate, summarise) also gets the log
length of its input (the prompt minus its first line), since its answer follows the input's size.
"""

from __future__ import annotations

import math
import re

_END_CHARS = 400

_TASKS: tuple[tuple[str, str], ...] = (
    ("rewrite", r"\b(?:re-?write|rephrase|paraphrase|reword|proofread|edit|correct|polish)\w*"),
    ("classify", r"\b(?:classif|categori[sz]|label|sentiment|which of the following)\w*"),
    ("explain", r"\b(?:explain|describe|discuss|elaborate|why\b|how (?:does|do|is|can))\w*"),
    ("summarise", r"\b(?:summari[sz]|summary|tl;?dr|condense|shorten)\w*"),
    ("translate", r"\b(?:translat)\w*"),
    (
        "list",
        r"\b(?:list|enumerate|brainstorm|suggest|name (?:some|a few|\d+)|give me (?:some|\d+))",
    ),
    ("write", r"\b(?:write|compose|draft|create|generate)\b"),
    (
        "code",
        r"\b(?:code|function|program|script|implement|python|javascript|java|sql|c\+\+|rust"
        r"|algorithm|regex|bash|class|api|debug|compile)\b",
    ),
    ("math", r"\b(?:calculate|compute|solve|how (?:many|much)|what is the (?:sum|product|total))"),
    ("extract", r"\b(?:extract|find all|identify|pick out|which (?:word|one))\b"),
    ("compare", r"\b(?:compare|contrast|difference between|pros and cons|vs\.?)\b"),
    ("roleplay", r"\b(?:act as|pretend|imagine (?:you|that)|you are an?|role-?play)\b"),
)
_LONG_FORM = re.compile(
    r"\b(?:essay|article|story|blog|report|in detail|detailed|comprehensive|step[- ]by[- ]step"
    r"|thorough|outline|plan|guide|tutorial|proposal|speech|script)\b"
)
_SHORT_FORM = re.compile(
    r"\b(?:one|a single|1)[- ](?:word|sentence|line|number|letter)\b|\bbrief(?:ly)?\b|\bconcise"
    r"|\bshort\b|\bin a few words\b|\bjust (?:the|answer|say|give)|\bonly (?:the|answer|output)"
    r"|\bno explanation\b|\bwithout explanation\b"
)
_YES_NO = re.compile(r"\b(?:yes or no|true or false|yes/no|true/false)\b")
_AUX_QUESTION = re.compile(
    r"^(?:is|are|does|do|did|can|could|should|would|will|was|were|has|have)\b[^?\n]{0,200}\?\s*$"
)
_POEM = re.compile(r"\b(?:poem|haiku|limerick|sonnet|lyrics|song|rhyme|slogan|tagline|tweet)\w*")
_LETTER = re.compile(r"\b(?:email|e-mail|letter|message|reply|response to)\b")
_WORD_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "twelve": 12, "fifteen": 15, "twenty": 20,
}  # fmt: skip
_UNITS: tuple[tuple[str, float], ...] = (
    ("word", 1.3),
    ("sentence", 22.0),
    ("paragraph", 110.0),
    ("stanza", 110.0),
    ("verse", 110.0),
    ("line", 14.0),
    ("bullet", 14.0),
    *(
        (unit, 30.0)
        for unit in (
            "item", "example", "idea", "tip", "way", "reason", "step", "question", "name",
            "title", "thing", "fact", "point", "option", "suggestion",
        )
    ),
)  # fmt: skip
"""Unit words (singular) of a size request and the tokens each unit stands for."""
_UNIT_TOKENS = {u: t for u, t in _UNITS} | {u + "s": t for u, t in _UNITS}
_N = r"(\d{1,5}|" + "|".join(_WORD_NUMBERS) + r")"
# one pass: a number, then the unit word, or one word (an adjective: "three short paragraphs";
# a hyphenated "500-word essay") and then the unit word
_SIZED = re.compile(r"\b" + _N + r"[- ]([a-z]+)(?:[- ]([a-z]+))?")
_LIST_N = re.compile(r"\b(?:list|top|give me|name)\s+" + _N + r"\b")
_HAS_NUMBER = re.compile(r"\d|\b(?:" + "|".join(_WORD_NUMBERS) + r")\b")

TASK_NAMES: tuple[str, ...] = tuple(name for name, _ in _TASKS)
_TASK_RES = tuple(re.compile(p) for _, p in _TASKS)
INSTRUCTION_FEATURE_NAMES: tuple[str, ...] = (
    *(f"task_{n}" for n in TASK_NAMES),
    "long_form",
    "short_form",
    "yes_no",
    "poem",
    "letter",
    "requested_size_log",
    "has_requested_size",
    "rewrite_input_log",
    "first_line_log",
)
INSTRUCTION_FEATURES = len(INSTRUCTION_FEATURE_NAMES)
"""Columns of `instruction_features`."""


def _number(text: str) -> float:
    return float(_WORD_NUMBERS.get(text, 0) or int(text))


def requested_tokens(text: str) -> float | None:
    """Output tokens an explicit size request asks for ("in 50 words", "list 10 ideas", "three
    paragraphs"): the largest such request in `text` (lower-case), None when there is none."""
    if not _HAS_NUMBER.search(text):
        return None
    best: float | None = None
    for m in _SIZED.finditer(text):
        per_unit = _UNIT_TOKENS.get(m.group(2)) or _UNIT_TOKENS.get(m.group(3) or "")
        n = _number(m.group(1))
        if per_unit is not None and 0 < n <= 10_000:
            best = max(best or 0.0, n * per_unit)
    for m in _LIST_N.finditer(text):
        n = _number(m.group(1))
        if 0 < n <= 10_000:
            best = max(best or 0.0, n * 30.0)
    return best


def _ends(prompt: str) -> str:
    text = prompt.lower()
    if len(text) <= 2 * _END_CHARS:
        return text
    return text[:_END_CHARS] + "\n" + text[-_END_CHARS:]


def instruction_features(prompt: str | None) -> tuple[float, ...]:
    """The INSTRUCTION_FEATURE_NAMES values of one prompt (all 0 without one)."""
    if not prompt:
        return (0.0,) * INSTRUCTION_FEATURES
    ends = _ends(prompt)
    tasks = [1.0 if r.search(ends) else 0.0 for r in _TASK_RES]
    first, _, rest = prompt.strip().partition("\n")
    size = requested_tokens(ends)
    rewrite_like = tasks[0] or tasks[3] or tasks[4]
    rest_words = len(rest.split()) if rest.strip() else len(prompt.split())
    return (
        *tasks,
        1.0 if _LONG_FORM.search(ends) else 0.0,
        1.0 if _SHORT_FORM.search(ends) else 0.0,
        1.0 if _YES_NO.search(ends) or _AUX_QUESTION.match(first.strip().lower()) else 0.0,
        1.0 if _POEM.search(ends) else 0.0,
        1.0 if _LETTER.search(ends) else 0.0,
        math.log1p(size) / 8.0 if size is not None else 0.0,
        1.0 if size is not None else 0.0,
        math.log1p(rest_words * 1.3) / 8.0 if rewrite_like else 0.0,
        math.log1p(len(first.split())) / 5.0,
    )
