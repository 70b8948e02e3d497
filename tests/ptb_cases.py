"""Generated captions rich in the cases where PTB tokenizers disagree: brackets (as symbols
and as PTB names in any case), straight and curly quotes, initials such as "A.", hyphens and
dashes, contractions, numbers, accented and non-Latin letters, empty captions."""

from __future__ import annotations

import random

WORDS = ["a", "man", "dog", "woman", "cat", "sits", "on", "the", "red", "bench", "two",
         "people", "riding", "bikes", "near", "water", "table", "with", "food", "of", "in",
         "is", "an", "old", "street", "sign", "young", "girl", "holding", "umbrella"]
CAPITALISED = ["A", "The", "Two", "An", "Man", "People", "Dog", "I", "O"]
UNICODE = ["café", "naïve", "Ångström", "señor", "über", "façade", "東京", "Москва", "λόγος",
           "coöperate", "Æsir", "straße", "ﬁne", "№5", "°C", "5×3", "½", "…", "·"]
BRACKET_NAMES = ["-LRB-", "-RRB-", "-LSB-", "-RSB-", "-LCB-", "-RCB-", "-lrb-", "-rrb-",
                 "-lsb-", "-rsb-", "-lcb-", "-rcb-", "-Lrb-", "-rRB-"]
INITIALS = ["A.", "a.", "B.", "J. R.", "t.v.", "T.V.", "U.S.", "Mr.", "Dr.", "St.", "e.g.",
            "i.e.", "etc.", "vs.", "a.m.", "p.m.", "No.", "Jr.", "x.", "Z."]
HYPHENS = ["well-known", "-", "--", "---", "–", "—", "x-ray", "-year", "old-", "e-mail",
           "3-year-old", "- -", "a-b-c", "‐", "−"]
QUOTES = ['"', "'", "`", "``", "''", "“", "”", "‘", "’", "«", "»", "„", "‹", "›"]
CONTRACTIONS = ["it's", "dog's", "isn't", "don't", "can't", "won't", "they're", "I'm",
                "we've", "he'll", "she'd", "dogs'", "DON'T", "o'clock", "rock'n'roll",
                "cannot", "gonna"]
OTHER = ["3.5", "1,000", "10:30", "50%", "#1", "&", "+", "=", "/", "*", "$5", "@", ";", ":",
         ",", "!", "?", "...", ".", "!!", "?!", ".."]


def _token(rng: random.Random) -> str:
    kind = rng.random()
    for threshold, pool in ((0.45, WORDS), (0.52, CAPITALISED), (0.60, UNICODE),
                            (0.67, BRACKET_NAMES), (0.75, INITIALS), (0.82, HYPHENS),
                            (0.87, CONTRACTIONS), (0.94, OTHER)):
        if kind < threshold:
            return rng.choice(pool)
    return rng.choice("()[]{}")


def _decorate(token: str, rng: random.Random) -> str:
    """Glue quotes, brackets or punctuation to a token, as people type them."""
    roll = rng.random()
    if roll < 0.10:
        quote = rng.choice(QUOTES)
        return quote + token + rng.choice([quote, rng.choice(QUOTES)])
    if roll < 0.18:
        opening = rng.choice("([{")
        return opening + token + {"(": ")", "[": "]", "{": "}"}[opening]
    if roll < 0.26:
        return token + rng.choice([".", ",", "!", "?", ";", ":", "-", "'s", "'"])
    return token


def generated_captions(count: int, seed: int = 0) -> list[str]:
    """`count` captions; about 1 in 40 is empty or blank."""
    rng = random.Random(seed)
    captions = []
    for _ in range(count):
        if rng.random() < 0.025:
            captions.append(rng.choice(["", " ", "  ", "\t"]))
            continue
        tokens = [_decorate(_token(rng), rng) for _ in range(rng.randint(1, 16))]
        glue = [rng.choice([" ", " ", " ", " ", "", "  "]) for _ in tokens]
        text = "".join(t + g for t, g in zip(tokens, glue, strict=True)).strip()
        if rng.random() < 0.5:
            text = text[:1].upper() + text[1:]
        if rng.random() < 0.6:
            text += rng.choice([".", ".", " .", "!", "?", "..", "...", ""])
        captions.append(text)
    return captions


# Rarer token classes of PTBLexer: URLs, e-mail addresses, hashtags, dates, fractions,
# telephone numbers, currencies, entities, SGML tags, abbreviations before numbers,
# assimilations, smileys, file names, soft hyphens, CP1252 characters, emoji.
EXOTIC = ["http://x.com/a", "www.site.org", "mail@site.com", "a@b", "#tag", "@user",
          "12/25/2020", "1-2-34", "3/4", "1 1/2", "555-1234-567", "(555) 123-4567", "$5",
          "US$5", "£3", "€4", "¥5", "¢", "1.5%", "+5", "-5", "5-6", "A&B", "AT&T", "S&P-500",
          "&amp;", "&quot;", "&lt;", "&gt;", "&apos;", "&nbsp;", "<b>", "</p>", "<a href=\"x\">",
          "<b class=x>", "C.D.s", "pro-", "anti-war", "'90s", "'em", "'til", "'cause",
          "c'mon", "y'all", "ol'", "n'", "'n'", "Cap'n", "c'est", "ain't", "Ph.D.", "Ed.D.",
          "U.S.-U.K.", "non-U.S.", "a.k.a.", "No. 5", "Fig. 2", "ca. 1900", "Jan. 5", "Inc.",
          "Mass.", "Wash. The", "e.g.,", "i.e.;", "etc.,", ". . .", "....", "‑", "_", "__",
          "**", "\\*", "==", "\\", "|", "~", "^", "<<", ">>", "²", "₂", "⅓", "¼", "⅛", "÷",
          "±", "§", "©", "®", "™", "•", "†", "‰", "←", "∞", "´", "¡", "¿", "???", ":)", ":-(",
          ";-)", ":P", ":D", "(^_^)", "^_^", "o_O", "x_x", "(-_-)", "<3", "العربية", "हिन्दी",
          "İstanbul", "Ⅳ", "\u00ad", "soft\u00adhyphen", "\u200b", "\ufeff", "\u00a0",
          "\u3000", "\u2009", "\t", "e\u0301", "👍", "\u0080", "\u0085", "\u0091", "\u0092",
          "\u0093", "\u0094", "\u0096", "\u0097", "x.x", "photo.jpg", "5x.x", "'tis", "'twas",
          "dunno", "wanna", "gotta", "lemme", "gimme", "12:30:45", ".5", ",5", "5.", "1e5",
          "0x1F", "2nd", "4x4", "B-52", "F-16s"]


def exotic_captions(count: int, seed: int = 0) -> list[str]:
    """`count` captions mixing the rarer classes with the common hard cases."""
    rng = random.Random(seed)
    pool = EXOTIC + BRACKET_NAMES + INITIALS + HYPHENS + QUOTES + CONTRACTIONS + OTHER
    captions = []
    for _ in range(count):
        tokens = [rng.choice(pool) for _ in range(rng.randint(1, 8))]
        glue = [rng.choice([" ", " ", "", "  "]) for _ in tokens]
        captions.append("".join(t + g for t, g in zip(tokens, glue, strict=True)).strip())
    return captions
