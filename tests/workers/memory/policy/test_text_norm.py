"""Tokenising (``workers.memory.policy.text_norm``): an ASCII text takes a shorter path (no
NFKC, no quote mapping, ``lower`` for ``casefold``) that must give the tokens the Unicode
path gives, since stored exact hashes and signatures are taken over them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workers.memory.policy.text_norm import terms_and_words, tokens

ASCII = st.text(st.characters(max_codepoint=127), max_size=80)


def _unicode_path(text: str) -> tuple[str, ...]:
    # A space and a non-ASCII word after the text send it down the Unicode path; the space
    # ends any token, so the text's own tokens come first, unchanged.
    found = tokens(text + " é")
    assert found[-1] == "é"
    return found[:-1]


def test_every_ascii_character_tokenises_as_on_the_unicode_path() -> None:
    for code in range(128):
        c = chr(code)
        text = f"A{c}b 1{c}2 {c}X 1{c}200,000 Don{c}T {c}"
        assert tokens(text) == _unicode_path(text), repr(c)


@settings(max_examples=300, deadline=None)
@given(text=ASCII)
def test_ascii_text_tokenises_as_on_the_unicode_path(text: str) -> None:
    assert tokens(text) == _unicode_path(text)


def test_the_unicode_path_still_folds_what_ascii_never_holds() -> None:
    assert tokens("Don’t pay ＄1,200 – Straße") == ("don't", "pay", "$", "1200", "strasse")
    assert tokens("Ｆｉｎｅ") == tokens("fine")


def test_fillers_drop_out_of_terms_with_their_words() -> None:
    assert terms_and_words("I really like the blue car") == (
        ("i", "like", "blu", "car"),
        ("i", "like", "blue", "car"),
    )
