"""Generate ``bench/data/write_policy/pairs.jsonl``: labelled (old, new) memory-text pairs for the
write policy's dedupe and contradiction stages (``bench/write_policy_pairs.py`` scores them).

Deterministic (seeded ``random.Random``): the same file on every run. Each line is
``{"id", "split", "old", "new", "label", "reason"}`` with ``label`` one of ``duplicate``,
``near_duplicate``, ``paraphrase_not_duplicate``, ``contradiction``, ``compatible``,
``unrelated``.

The two splits share no template and no slot vocabulary (names, cities, employers, foods…), and
use different filler words, so the holdout is a real held-out check of rules tuned on dev. A
share of the near duplicates are rewordings no lexicon here knows ("is based in" for "lives
in"): the honest hard cases.

    .venv/bin/python bench/data/write_policy/make_pairs.py
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

OUT = Path(__file__).resolve().parent / "pairs.jsonl"
SEED = 20250225
COUNTS = {"dev": 2400, "holdout": 1600}
SHARES = {
    "duplicate": 0.14,
    "near_duplicate": 0.20,
    "paraphrase_not_duplicate": 0.12,
    "contradiction": 0.28,
    "compatible": 0.12,
    "unrelated": 0.14,
}


def _w(text: str, sep: str = " ") -> list[str]:
    return text.split(sep)


@dataclass(frozen=True)
class Template:
    text: str
    negated: str | None = None
    details: tuple[str, ...] = ()
    hard: tuple[tuple[str, str], ...] = ()
    """Rewordings that keep the fact but no lexicon knows: (phrase in text, replacement)."""


@dataclass
class Vocab:
    slots: dict[str, list[str]]
    fillers: list[str]
    likes: dict[str, tuple[str, str]]
    """Preference verb -> (its base form, its opposite)."""
    templates: list[Template] = field(default_factory=list)


DEV = Vocab(
    slots={
        "P": _w("Alice Bob Carol David Emma Frank Grace Henry Irene Jack Laura Martin"),
        "Q": _w("Nora Oscar Paula Quentin Rita Simon Tina Victor"),
        "CITY": _w("Berlin Paris Madrid Lisbon Vienna Prague Oslo Dublin Warsaw Athens"),
        "ORG": _w("Google Siemens Spotify Airbus Nokia Zalando Philips Bosch"),
        "COLOR": _w("blue green red yellow purple orange black teal"),
        "FOOD": _w("sushi pizza lasagna curry tacos ramen falafel paella"),
        "LANG": _w("Python Rust Go Java Kotlin Haskell Elixir Scala"),
        "TOOL": _w("Notion Obsidian Evernote Logseq Bear Joplin"),
        "NATLANG": _w("German French Spanish Italian Polish Greek Dutch"),
        "DAY": _w("Monday Tuesday Wednesday"),
        "ROLE": _w("data engineer|product manager|designer|team lead", "|"),
        "PLACE": _w("old harbour|central station|city park|university", "|"),
    },
    fillers=_w("really actually currently now"),
    likes={
        "likes": ("like", "dislikes"),
        "loves": ("love", "hates"),
        "prefers": ("prefer", "avoids"),
    },
    templates=[
        Template(
            "{P} lives in {CITY}",
            "{P} no longer lives in {CITY}",
            ("near the {PLACE}", "with two flatmates"),
            (("lives in", "is based in"),),
        ),
        Template(
            "{P} works at {ORG}",
            "{P} doesn't work at {ORG} anymore",
            ("as a {ROLE}", "in the Munich office"),
            (("works at", "is with"),),
        ),
        Template("{P}'s favourite colour is {COLOR}", None, ("for clothes and furniture",)),
        Template("{P} {LIKE} {FOOD}", "{P} does not {LIKEBASE} {FOOD}", ("from the corner shop",)),
        Template("{P} is {N} years old", None, ("and plays tennis",)),
        Template(
            "{P}'s flight to {CITY} leaves on {DATE}",
            None,
            ("from terminal {N}", "with a stopover"),
            (("leaves", "departs"),),
        ),
        Template("The team standup is at {TIME} every {DAY}", None, ("in meeting room B",)),
        Template("{P} has {N} children", None, ("who go to the same school",)),
        Template(
            "{P} {LIKE} {LANG} for backend work",
            "{P} does not {LIKEBASE} {LANG} for backend work",
            ("because of its type system",),
        ),
        Template("{P} uses {TOOL} for note taking", "{P} has stopped using {TOOL} for note taking"),
        Template("{P}'s manager is {Q}", None, ("since the reorganisation",)),
        Template(
            "{P} is allergic to {FOOD}",
            "{P} is not allergic to {FOOD}",
            ("and carries an epipen",),
        ),
        Template("{P} runs {N} km every {DAY}", None, ("along the river",)),
        Template("The rent for the flat in {CITY} is {N} euros per month", None, ("plus heating",)),
        Template("{P} speaks {NATLANG} at home", "{P} never speaks {NATLANG} at home"),
        Template("{P} was born on {DATE}", None, ("in a small village",)),
        Template("{P} owes {Q} {N} dollars", "{P} doesn't owe {Q} any money"),
        Template("{P} sent the contract to {Q} on {DAY}", None, ("by registered mail",)),
        Template("{P} mentors {Q} on system design", "{P} no longer mentors {Q} on system design"),
    ],
)

HOLDOUT = Vocab(
    slots={
        "P": _w("Mia Noah Olivia Liam Sofia Lucas Chloe Ethan Zoe Mason Ava Logan"),
        "Q": _w("Hannah Isaac Julia Kevin Leah Marco Nina Owen"),
        "CITY": _w("Toronto Denver Austin Seattle Montreal Chicago Boston Phoenix"),
        "ORG": _w("Shopify Stripe Atlassian Canva Datadog Twilio Slack Figma"),
        "DRINK": _w("espresso|green tea|oat latte|black coffee|matcha|chai", "|"),
        "SPORT": _w("tennis squash badminton volleyball climbing rowing"),
        "INSTR": _w("cello violin drums trumpet saxophone bass"),
        "EDITOR": _w("Vim Emacs Helix Sublime Zed Nano"),
        "PWMGR": _w("Bitwarden 1Password KeePass Dashlane"),
        "FOOD2": _w("oatmeal yogurt granola pancakes bagels omelettes"),
        "SUBJECT": _w("physics economics biology architecture linguistics chemistry"),
        "TEAM": _w("the Raptors|the Celtics|the Canucks|the Bulls|the Nuggets", "|"),
        "DAY": _w("Thursday Friday Saturday Sunday"),
    },
    fillers=_w("definitely still just honestly"),
    likes={
        "enjoys": ("enjoy", "detests"),
        "adores": ("adore", "despises"),
        "loves": ("love", "dislikes"),
    },
    templates=[
        Template(
            "{P} moved to {CITY} last year",
            "{P} never moved to {CITY}",
            ("for a new job",),
            (("moved to", "relocated to"),),
        ),
        Template(
            "{P} is employed by {ORG}",
            "{P} is no longer employed by {ORG}",
            ("as a contractor",),
            (("is employed by", "is on the payroll of"),),
        ),
        Template(
            "{P} usually drinks {DRINK} in the morning",
            "{P} stopped drinking {DRINK} in the morning",
            ("before the commute",),
        ),
        Template(
            "{P} {LIKE} playing {SPORT}", "{P} doesn't {LIKEBASE} playing {SPORT}", ("on weekends",)
        ),
        Template("{P}'s daughter is {N} years old", None, ("and loves drawing",)),
        Template("The dentist appointment for {P} is on {DATE}", None, ("at the downtown clinic",)),
        Template("Our weekly sync with {P} happens on {DAY} at {TIME}", None, ("over video",)),
        Template("{P} owns {N} bicycles", None, ("kept in the garage",)),
        Template("{P} plays the {INSTR} in a band", "{P} no longer plays the {INSTR} in a band"),
        Template("{P}'s go-to editor is {EDITOR}", None, ("with a custom config",)),
        Template("{P} keeps passwords in {PWMGR}", "{P} never keeps passwords in {PWMGR}"),
        Template("{P} reports to {Q}", "{P} does not report to {Q}", ("in the platform group",)),
        Template(
            "{P} eats {FOOD2} for breakfast",
            "{P} doesn't eat {FOOD2} for breakfast",
            ("with fresh berries",),
            (("eats", "has"),),
        ),
        Template("{P} cycles {N} miles to the office", None, ("through the park",)),
        Template("The monthly gym membership of {P} costs {N} dollars", None, ("including sauna",)),
        Template(
            "{P} studied {SUBJECT} at university", "{P} never studied {SUBJECT} at university"
        ),
        Template("{P}'s wedding anniversary is on {DATE}", None, ("and they plan a trip",)),
        Template("{P} borrowed {N} books from {Q}", None, ("last month",)),
        Template("{P} introduced {Q} to the client", None, ("during the kickoff",)),
        Template("{P} supports {TEAM}", "{P} does not support {TEAM}", ("since childhood",)),
    ],
)

SINGLE_VALUED_Q = frozenset({"{P}'s manager is {Q}", "{P} reports to {Q}"})
"""Facts with one {Q} at a time: a new {Q} contradicts the old one."""
MONTHS = "January February March April May June July August September October November December"


def _date(rng: random.Random) -> str:
    year, month, day = rng.randrange(1975, 2027), rng.randrange(1, 13), rng.randrange(1, 29)
    name = MONTHS.split()[month - 1]
    return rng.choice(
        (f"{year}-{month:02d}-{day:02d}", f"{name} {day}, {year}", f"{day} {name} {year}")
    )


def _time(rng: random.Random) -> str:
    return rng.choice((f"{rng.randrange(7, 18)}:{rng.choice(('00', '15', '30', '45'))}",))


def _fill(template: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], template)


def _values(rng: random.Random, vocab: Vocab) -> dict[str, str]:
    values = {slot: rng.choice(options) for slot, options in vocab.slots.items()}
    like = rng.choice(list(vocab.likes))
    values |= {"LIKE": like, "LIKEBASE": vocab.likes[like][0], "N": str(rng.randrange(2, 90))}
    values |= {"DATE": _date(rng), "TIME": _time(rng)}
    while values["Q"] == values["P"]:
        values["Q"] = rng.choice(vocab.slots["Q"])
    return values


def _other(rng: random.Random, vocab: Vocab, slot: str, current: str) -> str:
    """Another value for ``slot``: never ``current`` (a contradiction must change the fact)."""
    while (value := _another(rng, vocab, slot, current)) == current:
        pass
    return value


def _another(rng: random.Random, vocab: Vocab, slot: str, current: str) -> str:
    if slot == "N":
        return str(max(1, int(current) + rng.choice((-3, -2, -1, 1, 2, 5, 10))))
    if slot == "DATE":
        return _date(rng)
    if slot == "TIME":
        return _time(rng)
    return rng.choice([v for v in vocab.slots[slot] if v != current])


def _surface(rng: random.Random, text: str) -> tuple[str, str]:
    """A variant differing only in case, whitespace, punctuation or Unicode form."""
    kind = rng.choice(("case", "whitespace", "punctuation", "unicode"))
    if kind == "case":
        return rng.choice((text.lower(), text.upper(), text.title())), kind
    if kind == "whitespace":
        return "  " + text.replace(" ", rng.choice(("  ", "\t", " \n "))) + " ", kind
    if kind == "punctuation":
        return rng.choice((text + ".", text + "!", text + " .", "- " + text + ";")), kind
    return text.replace("'", "’").replace(" ", "\u00a0", 1) + ".", kind


def _near(rng: random.Random, vocab: Vocab, template: Template, text: str) -> tuple[str, str]:
    words = text.split(" ")
    options = ["filler", "filler", "spelling_or_synonym"]
    if template.hard:
        options.append("hard")
    kind = rng.choice(options)
    if kind == "hard":
        phrase, replacement = rng.choice(template.hard)
        if phrase in text:
            return text.replace(phrase, replacement, 1), "unknown_rewording"
    if kind == "spelling_or_synonym":
        for old, new in (
            ("favourite", "favorite"),
            ("colour", "color"),
            ("lives", "resides"),
            ("works at", "is employed at"),
            ("uses", "utilises"),
            ("children", "kids"),
            ("speaks", "talks"),
            ("usually", "typically"),
            ("loves", "adores"),
            ("likes", "enjoys"),
        ):
            if old in text:
                return text.replace(old, new, 1), "spelling_or_synonym"
    position = rng.randrange(1, len(words))
    filler = rng.choice(vocab.fillers)
    return " ".join([*words[:position], filler, *words[position:]]), "filler"


def _pair(
    rng: random.Random, vocab: Vocab, label: str
) -> tuple[str, str, str]:  # (old, new, reason)
    template = rng.choice(vocab.templates)
    values = _values(rng, vocab)
    old = _fill(template.text, values)
    if label == "duplicate":
        new, reason = _surface(rng, old)
        return old, new, reason
    if label == "near_duplicate":
        new, reason = _near(rng, vocab, template, old)
        if rng.random() < 0.3:
            new = _surface(rng, new)[0]
        return old, new, reason
    if label == "paraphrase_not_duplicate":
        if "{Q}" in template.text and rng.random() < 0.6:
            swapped = template.text.replace("{P}", "\0").replace("{Q}", "{P}").replace("\0", "{Q}")
            return old, _fill(swapped, values), "roles_swapped"
        changed = values | {"P": _other(rng, vocab, "P", values["P"])}
        return old, _fill(template.text, changed), "subject_changed"
    if label == "contradiction":
        choices = [s for s in ("N", "DATE", "TIME", "LIKE") if "{" + s + "}" in template.text]
        choices += [s for s in vocab.slots if s not in "PQ" and "{" + s + "}" in template.text]
        if template.text in SINGLE_VALUED_Q:
            choices.append("Q")
        if template.negated:
            choices.append("NEG")
        if not choices:  # nothing in this fact can change into a contradiction: another one
            return _pair(rng, vocab, label)
        slot = rng.choice(choices)
        if slot == "NEG":
            old, new = (
                (old, _fill(template.negated, values))
                if rng.random() < 0.7
                else (_fill(template.negated, values), old)
            )
            return old, new, "negation"
        if slot == "LIKE":
            flipped = values | {"LIKE": vocab.likes[values["LIKE"]][1]}
            return old, _fill(template.text, flipped), "preference_changed"
        changed = values | {slot: _other(rng, vocab, slot, values[slot])}
        reason = {
            "N": "number_changed",
            "DATE": "date_changed",
            "TIME": "date_changed",
            "DAY": "date_changed",
        }
        new = _fill(template.text, changed)
        if rng.random() < 0.25:
            new = _near(rng, vocab, Template(template.text), new)[0]
        return old, new, reason.get(slot, "object_changed")
    if label == "compatible":
        details = template.details or ("according to {Q}",)
        longer = f"{old}{rng.choice((', ', ' '))}{_fill(rng.choice(details), values)}"
        return (
            (old, longer, "added_detail") if rng.random() < 0.8 else (longer, old, "removed_detail")
        )
    # Another fact, half of the time about the same person; never the same template about the
    # same person (that would be a contradiction or a duplicate, not an unrelated pair).
    other_template = rng.choice([t for t in vocab.templates if t is not template])
    other_values = _values(rng, vocab)
    if rng.random() < 0.5:
        other_values["P"] = values["P"]
    return old, _fill(other_template.text, other_values), "different_fact"


def generate() -> list[dict[str, str]]:
    """Every pair, dev first, in a fixed order."""
    rng = random.Random(SEED)
    rows: list[dict[str, str]] = []
    for split, vocab in (("dev", DEV), ("holdout", HOLDOUT)):
        for label, share in SHARES.items():
            made = 0
            seen: set[tuple[str, str]] = set()
            while made < round(COUNTS[split] * share):
                old, new, reason = _pair(rng, vocab, label)
                if (old, new) in seen or (label != "duplicate" and old == new):
                    continue
                seen.add((old, new))
                rows.append(
                    {
                        "id": f"{split}-{label}-{made:04d}",
                        "split": split,
                        "old": old,
                        "new": new,
                        "label": label,
                        "reason": reason,
                    }
                )
                made += 1
    rng.shuffle(rows)
    return rows


def main() -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    rows = generate()
    with OUT.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {len(rows)} pairs to {OUT} ({OUT.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
