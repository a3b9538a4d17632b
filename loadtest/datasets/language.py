"""A small, fast language guess by Unicode script and common words; no model files.

ShareGPT carries no language field, and a statistical detector over ~18k conversations
would dominate the first start-up. Scripts identify most non-Latin languages exactly;
for Latin text, a handful of very common function words separate English from the
large European languages. Anything else Latin is ``xx`` (unknown Latin).
"""

from __future__ import annotations

import re

__all__ = ["LANGUAGES", "detect_language"]

# (first code point, last code point, language) for scripts that name one language
# well enough for load testing purposes.
_SCRIPT_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0400, 0x04FF, "ru"),  # Cyrillic (mostly Russian in ShareGPT)
    (0x0370, 0x03FF, "el"),
    (0x0590, 0x05FF, "he"),
    (0x0600, 0x06FF, "ar"),
    (0x0900, 0x097F, "hi"),
    (0x0E00, 0x0E7F, "th"),
    (0x3040, 0x30FF, "ja"),  # kana decides Japanese even beside kanji
    (0xAC00, 0xD7AF, "ko"),
    (0x1100, 0x11FF, "ko"),
    (0x4E00, 0x9FFF, "zh"),
)

_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        [
            "the",
            "and",
            "is",
            "of",
            "to",
            "in",
            "that",
            "it",
            "for",
            "you",
            "with",
            "this",
            "are",
            "be",
        ]
    ),
    "es": frozenset(
        [
            "el",
            "la",
            "los",
            "las",
            "que",
            "de",
            "en",
            "por",
            "para",
            "una",
            "es",
            "con",
            "como",
            "del",
        ]
    ),
    "fr": frozenset(
        [
            "le",
            "la",
            "les",
            "des",
            "est",
            "et",
            "que",
            "une",
            "pour",
            "dans",
            "vous",
            "pas",
            "sur",
            "du",
        ]
    ),
    "de": frozenset(
        [
            "der",
            "die",
            "das",
            "und",
            "ist",
            "nicht",
            "ich",
            "sie",
            "mit",
            "ein",
            "eine",
            "zu",
            "auf",
            "den",
        ]
    ),
    "pt": frozenset(
        ["o", "os", "que", "de", "em", "uma", "para", "com", "não", "do", "da", "é", "você"]
    ),
    "it": frozenset(
        ["il", "che", "di", "la", "per", "non", "una", "sono", "con", "del", "della", "è", "gli"]
    ),
}

LANGUAGES = (
    "en",
    "es",
    "fr",
    "de",
    "pt",
    "it",
    "xx",
    *sorted({lang for _, _, lang in _SCRIPT_RANGES}),
)
"""Every code ``detect_language`` can return."""

_WORD_RE = re.compile(r"[^\W\d_]+")


def detect_language(text: str, sample: int = 2000) -> str:
    """Guess the language of ``text`` from its first ``sample`` characters."""
    head = text[:sample]
    counts: dict[str, int] = {}
    letters = 0
    for ch in head:
        cp = ord(ch)
        if cp < 0x0370:
            if ch.isalpha():
                letters += 1
            continue
        for lo, hi, lang in _SCRIPT_RANGES:
            if lo <= cp <= hi:
                counts[lang] = counts.get(lang, 0) + 1
                break
    if counts:
        lang, n = max(counts.items(), key=lambda kv: kv[1])
        # Japanese text is mostly kanji: any kana beside CJK means Japanese.
        if lang == "zh" and counts.get("ja", 0) >= max(2, n // 20):
            return "ja"
        if n >= max(5, letters // 4):
            return lang
    words = _WORD_RE.findall(head.lower())
    if not words:
        return "xx"
    scores = {lang: sum(1 for w in words if w in vocab) for lang, vocab in _WORDS.items()}
    best = max(scores, key=lambda k: scores[k])
    return best if scores[best] >= 2 or (scores[best] >= 1 and len(words) < 8) else "xx"
