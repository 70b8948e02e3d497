"""A Python re-implementation of the Stanford PTBLexer that pycocoevalcap runs (CoreNLP 3.4.1,
its default PTB3 options): the COCO tokens without Java.

PTBLexer is a JFlex scanner: at each position every rule is tried, the longest match wins
(a rule's trailing context counts towards the length but is read again) and, between equally
long matches, the earlier rule. Literal words match in any case, character classes only as
written. The rules follow the jar's behaviour, probed class by class against it: words
(with inner periods, "t.v.man"), contractions and assimilations ("cannot" -> can not),
abbreviations and acronyms, numbers, fractions, URLs, e-mail addresses, file names, SGML
tags, smileys, brackets (named -LRB- ...), LaTeX quotes, dashes, ellipses and symbols;
characters it cannot tokenize are deleted. Each rule is a POSIX (leftmost-longest) regex of
the `regex` package, as JFlex's own matching is longest-first; at each position only the
rules that can start with its character are tried."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import cache

import regex

# Where the jar's Unicode tables (2014) and Python's differ, probed code point by code point
# ("ab?cd" one word or not; tests/test_tokenize.py checks them): word characters PTBLexer
# has beyond Unicode's letters and marks, and letters, marks and digits it does not know.
_JAR_WORD_EXTRA = """
    02C2-02C5 02D2-02DF 02E5-02EB 02ED 02EF-02FF 0375 0378-0379 0384-0385 03F6 055A-055F
    06DD-06DE 06E9 06FD-06FE 070F 074B-074C 0A43-0A46 0A49-0A4A 0A4E-0A4F 0AC6 0ACA
    0ACE-0ACF 0C45 0C49 0C4E-0C54"""
_JAR_NOT_WORD = """
    037F 0528-052F 0560 0588 05EF 0610-0614 065F 07FD 0816-0819 081B-0823 0825-0827
    0829-082D 0859-085B 0860-086A 0870-0887 0889-088E 0898-089F 08A1 08AD-08E1 08E3-08FF
    093A-093B 094F 0956-0957 0978 0980 09FC 09FE 0A51 0A70-0A71 0A75 0AE2-0AE3 0AF9-0AFF
    0B01-0B03 0B3C 0B3E-0B44 0B47-0B48 0B4B-0B4D 0B55-0B57 0B62-0B63 0BD7 0C00 0C04 0C34
    0C3C 0C5A 0C5D 0C62-0C63 0C80-0C83 0CBC 0CBE-0CC4 0CC6-0CC8 0CCA-0CCD 0CD5-0CD6 0CDD
    0CE2-0CE3 0D00-0D04 0D3B-0D3C 0D4A-0D4D 0D54-0D57 0D5F 0D62-0D63 0D81-0D83 0DCA
    0DCF-0DD4 0DD6 0DD8-0DDF 0DE6-0DEF 0DF2-0DF3 0E86 0E89 0E8C 0E8E-0E93 0E98 0EA0
    0EA8-0EA9 0EAC 0F18-0F19 0F35 0F37 0F39 0F3E-0F3F 0F71-0F84 0F86-0F87 0F8D-0F97
    0F99-0FBC 0FC6 102B-103E 1056-1059 105E-1060 1062-1064 1067-106D 1071-1074 1082-108D
    108F 109A-109D 135D-135F 13F5 13F8-13FD 16F1-16F8 170D 1712-1715 171F 1732-1734
    1752-1753 1772-1773 17B4-17D3 17DD 180B-180D 180F 1878 18A9 191D-191E 1920-192B
    1930-193B 19B0-19C0 19C8-19C9 1A17-1A1B 1A55-1A5E 1A60-1A7C 1A7F 1AB0-1ABD 1ABF-1ACE
    1B00-1B04 1B34-1B44 1B4C 1B6B-1B73 1B80-1B82 1BA1-1BAD 1BE6-1BF3 1C24-1C37 1C80-1C88
    1C90-1CBA 1CBD-1CBF 1CD0-1CD2 1CD4-1CE8 1CED 1CF2-1CF4 1CF7-1CFA 1DC0-1DFF 20D0-20DC
    20E1 20E5-20F0 2C2F 2C5F 2CEF-2CF1 2D7F 2DE0-2DFF 302A-302F 3099-309A 312E-312F
    31BB-31BF 4DB6-4DBF 9FCD-9FFF A66F A674-A67D A698-A69F A6F0-A6F1 A78F A794-A79F
    A7AB-A7CA A7D0-A7D1 A7D3 A7D5-A7D9 A7F2-A7F7 A802 A806 A80B A823-A827 A82C A880-A881
    A8B4-A8C5 A8E0-A8F1 A8FD-A8FF A926-A92D A947-A953 A980-A983 A9B3-A9C0 A9E0-A9FE
    AA29-AA36 AA43 AA4C-AA4D AA7B-AA7F AAB0 AAB2-AAB4 AAB7-AAB8 AABE-AABF AAC1 AAEB-AAEF
    AAF5-AAF6 AB30-AB5A AB5C-AB69 AB70-ABBF ABE3-ABEA ABEC-ABED FB1E FE00-FE0F FE20-FE2F"""


def _code_points(ranges: str) -> set[int]:
    points: set[int] = set()
    for item in ranges.split():
        first, _, last = item.partition("-")
        points.update(range(int(first, 16), int(last or first, 16) + 1))
    return points


@cache
def _char_class(categories: tuple[str, ...], extra: str = "") -> str:
    """A character class of the BMP characters of these Unicode categories (Java's
    isLetter is L*, isDigit Nd) as the jar knows them. JFlex reads the BMP only: other
    characters are untokenizable, as in the jar."""
    codes = {code for code in range(0x10000)
             if unicodedata.category(chr(code)).startswith(categories)}
    codes = sorted((codes - _code_points(_JAR_NOT_WORD)) | _code_points(extra))
    ranges: list[list[int]] = []
    for code in codes:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "[" + "".join(re.escape(chr(a)) if a == b
                         else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                         for a, b in ranges) + "]"


def _words(*words: str) -> str:
    """Literal words, matched in any case (JFlex %caseless)."""
    return "(?i:" + "|".join(words) + ")"


def _caseless(pattern: str) -> str:
    """`pattern` with the letters of each (?i:...) group spelled as [xX]: the regex
    module mis-scans alternations of scoped case-insensitive groups."""
    out, position = [], 0
    while (start := pattern.find("(?i:", position)) >= 0:
        out.append(pattern[position:start])
        depth, index = 1, start + 4
        while depth:
            char = pattern[index]
            if char == "\\":
                index += 1
            elif char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
            index += 1
        inner = pattern[start + 4:index - 1]
        out.append("(?:" + re.sub(r"(?<!\\)[A-Za-z]",
                                  lambda m: f"[{m[0].lower()}{m[0].upper()}]", inner) + ")")
        position = index
    return "".join(out) + pattern[position:]


# A rule: its pattern (the token in group "token", then its trailing context) and the
# action that gives the token's text (None: the token is dropped).
Rule = tuple[regex.Pattern[str], Callable[[str], str | None]]


@cache
def _rules() -> list[Rule]:
    letter = _char_class(("L",), _JAR_WORD_EXTRA)
    mark = f"(?:{_char_class(('Mn', 'Mc'))}|\u00ad)"
    digit = _char_class(("Nd",))
    space = r"[ \t\u00a0\u2000-\u200a\u3000]"
    newline = r"\r\n?|\n|[\u2028\u2029\u000b\u000c\u0085]"
    space_nl = f"(?:{space}|{newline})"
    name = "[A-Za-z][A-Za-z0-9_:.-]*"
    quoted = r"""['"][^\r\n'"]*['"]"""
    sgml = (rf"<(?:[!?][A-Za-z-][^>\r\n]*|/?[A-Za-z][A-Za-z0-9:.-]*(?: +(?:{name}"
            rf"(?: *= *{quoted})?|{quoted}))* */?)>")
    sentence_end = f"{space_nl}(?:{space_nl}|[A-Z]|{sgml})"
    apostrophe = r"(?:['\u0092\u2019]|&apos;)"
    apostrophe_etc = r"(?:['`\u0092\u2019\u0091\u2018\u201b]|&apos;)"
    word_letter = f"(?:{letter}|{mark}|&[aeiouAEIOU](?i:acute|grave|uml);)"
    word_part = f"{word_letter}(?:{word_letter}|{digit})*"
    word = f"{word_part}(?:[.!?]{word_part})*"  # "t.v.man" is one word
    number = f"[-+]?(?:(?:{digit})+|(?:{digit})*(?:[.:,\u00ad\u066b\u066c](?:{digit})+)+)"
    hyphen = r"[-_\u058a\u2010\u2011]"
    alnum = f"(?:{letter}|{digit})"
    # hyphenated things know Unicode's letters alone (JFlex's [:letter:]), not the jar's
    # extra word characters: "\u0378n-lrb-" is two tokens
    thing_alnum = f"(?:{_char_class(('L',))}|{digit})"
    thing_part = f"(?:[dDoOlL]{apostrophe_etc}{thing_alnum})?{thing_alnum}+"
    thing = f"{thing_part}(?:{hyphen}{thing_part})*"
    redaux = f"{apostrophe}(?:[msdMSD]|(?i:re|ve|ll))"
    sredaux = f"(?i:n){apostrophe_etc}(?i:t)"
    insentence = r"[,;:\u3001]"
    # Abbreviations, as the jar treats them (probed word by word): the first kind keeps its
    # period before a lower-case word and gives it up before a capitalised one (and wins
    # over a word glued after it); the second always keeps it; the third only before a
    # number. Some match only capitalised (first list) or only with lower-case letters.
    abbrev1 = _words(
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sept?", "oct", "nov", "dec", "mon",
        "tues?", "wed", "thu", "thurs", "fri", "ala", "ariz", "calif", "colo", "conn", "ct",
        "dak", "fla", "ga", "ind", "kans?", "ky", "md", "mich", "minn", "mo", "mont", "neb",
        "nev", "okla", "penn", "tenn", "va", "vt", "wisc?", "wyo", "inc", "cos?", "corp",
        "ltd", "plc", "rt", "bancorp", "bhd", "assn", "univ", "intl", "sys", "tel", "est",
        "ext", "sq", "jr", "sr", "bros", "esq", "etc", "al", "seq", "bldg", "blvd", "rd",
        r"(?:ed|ph)\.d") \
        + "|(?:A(?i:z|rk)|D(?i:el)|I(?i:ll)|L(?i:a)|M(?i:ass|iss)|O(?i:re)|P(?i:a)|T(?i:ex)" \
        "|W(?i:ash))|(?i:pp?t)[ye](?i:s)?"
    acro = r"[A-Za-z](?:\.[A-Za-z])*" \
        r"|(?i:canada|sino|korean|eu|japan|non)-(?i:u)\.(?i:s)" \
        r"|(?i:u)\.(?i:s)\.-(?:(?i:u)\.(?i:k)|(?i:u)\.(?i:s)\.(?i:s)\.(?i:r))"
    acro2 = acro.replace(")*", ")+", 1)  # two letters at least
    abbrev4 = _words(
        "dept", "ft", "ph", "mrs?", "ms", "drs?", "profs?", "sens?", "reps?", "attys?", "lt",
        "col", "gen", "messrs", "govs?", "adm", "rev", "maj", "sgt", "cpl", "pvt", "capt",
        "ste?", "ave", "pres", "lieut", "hon", "brig", "co?mdr", "pfc", "spc", "supts?", "det",
        "mt", "adj", "adv", "asst", "assoc", "ens", "insp", "mlle", "mme", "msgr", "sfc", "invt",
        "elec", "natl", "vs", "alex", "wm", "jos", "cie", "cf", "treas", r"a\.k\.a") \
        + "|(?i:m)[ft](?i:g)|" + acro
    abbrev3 = _words("nos?", "prop", "ca", "figs?", "art", "pp", "op")
    rules: list[tuple[str, Callable[[str], str | None]]] = []

    def rule(pattern: str, action: Callable[[str], str | None] = _same,
             context: str = "") -> None:
        """A rule; its trailing `context` counts for the longest match but is read again."""
        rules.append((f"(?P<token>{pattern}){context and f'(?:{context})'}", action))

    rule(_words("can"), context=_words("not"))
    rule(f"{apostrophe}(?i:t)", context=_words("is", "was"))
    rule(_words("gon", "wan"), context=_words("na"))
    rule(_words("got"), context=_words("ta"))
    rule(_words("lem", "gim"), context=_words("me"))
    rule(sgml, lambda text: text.replace(" ", "\u00a0"))
    rule(r"&(?i:md|mdash|ndash);|[\u0096\u0097\u2013\u2014\u2015]", lambda text: "--")
    rule(r"(?i:&amp;)", lambda text: "&")
    rule(r"&(?:(?i:ht|tl|ur|lr|qc|ql|qr|odq|cdq)|#[0-9]+);")
    rule(word, _no_soft_hyphen, context=redaux)
    rule("[A-Za-z\u00ad]*[A-MO-Za-mo-z]\u00ad*", _no_soft_hyphen, context=sredaux)
    rule(word, _no_soft_hyphen)
    rule(f"{apostrophe}(?i:n){apostrophe}?|[lLdDjJ]{apostrophe}|(?i:dunkin|somethin|ol)"
         f"{apostrophe}|{apostrophe}(?i:em)|[A-HJ-XZn]{apostrophe_etc}{letter}{{2}}{letter}*"
         f"|{apostrophe}[2-9]0(?i:s)|{apostrophe}(?i:till?)|{letter}+[aeiouyAEIOUY]"
         f"{apostrophe_etc}[aeiouA-Z]{letter}*|{apostrophe}(?i:cause)|(?i:cont)'(?i:d)\\.?"
         "|(?i:nor'easter|c'mon|e'er|s'mores|ev'ry|li'l|nat'l)")
    rule(f"(?i:y){apostrophe}", context=letter)
    rule(r"(?i:https?)://[^ \t\n\f\r\"<>|()]+[^ \t\n\f\r\"<>|.!?(){},-]")
    rule(r"(?:(?i:www)\.(?:[^ \t\n\f\r\"<>|.!?(){},]+\.)+[a-zA-Z]{2,4}"
         r"|(?:[^ \t\n\f\r\"`'<>|.!?(){},-_$]+\.)+(?i:com|net|org|edu))"
         r"(?:/[^ \t\n\f\r\"<>|()]+[^ \t\n\f\r\"<>|.!?(){},-])?")
    rule(r"(?:(?i:&lt;)|<)?[a-zA-Z0-9][^ \t\n\f\r\"<>|()\u00a0{}]*@"
         r"(?:[^ \t\n\f\r\"<>|(){}.\u00a0]+\.)*[^ \t\n\f\r\"<>|(){}.\u00a0]+"
         r"(?:(?i:&gt;)|>)?")
    rule(f"@[a-zA-Z_][a-zA-Z_0-9]*|#{word_letter}+")
    rule(redaux, _closing_quote, context="[^A-Za-z]")
    rule(sredaux, _closing_quote)
    rule(f"(?:{digit}){{1,2}}[-/](?:{digit}){{1,2}}[-/](?:{digit}){{2,4}}")
    rule(number, _no_soft_hyphen)
    rule(r"[\u207a\u207b\u208a\u208b]?(?:[\u2070\u00b9\u00b2\u00b3\u2074-\u2079]+"
         r"|[\u2080-\u2089]+)")
    rule(f"(?:(?:{digit}){{1,4}}[- \u00a0])?(?:{digit}){{1,4}}(?:\\\\?/|\u2044)"
         f"(?:{digit}){{1,4}}", lambda text: text.replace(" ", "\u00a0"))
    rule(r"[\u00bc\u00bd\u00be\u2153-\u215e]", _fraction)
    rule(r"-(?i:rrb|lrb|rcb|lcb|rsb|lsb)-|(?i:c\.d\.s|pro-|anti-|s&p-500|s&amp;p-500|s&ls"
         f"|s&amp;ls)|(?i:cap){apostrophe}(?i:n)|(?i:c){apostrophe}(?i:est)",
         _ampersand)
    rule(r"[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\?/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2}")
    rule(r"[A-Z]*\$|#")
    rule(r"[cC]\+\+|[cCfF]#")  # programming languages: C++, C#, F#
    rule(r"[\u00a2\u00a3\u00a4\u00a5\u0080\u20a0\u20ac\u060b\u0e3f\u20a4\uffe0\uffe1\uffe5"
         r"\uffe6]", _currency)
    rule(f"(?:{acro})\\.", _acronym, context=f"{space}+(?:[A]bout|[A]ccording|[A]dditionally"
         "|[A]fter|[A]n|[A]|[A]s|[A]t|[B]ut|[E]arlier|[H]e|[H]er|[H]ere|[H]owever|[I]f|[I]n|[I]t|[L]ast|[M]any"
         "|[M]ore|[M]r\\.|[M]s\\.|[N]ow|[O]nce|[O]ne|[O]ther|[O]ur|[S]he|[S]ince|[S]o|[S]ome"
         "|[S]uch|[T]hat|[T]he|[T]hen|[T]here|[T]hese|[T]hey|[T]his|[W]e|[W]hen|[W]hile|[W]hat"
         f"|[Y]et|[Y]ou|{sgml}){space_nl}")
    rule(f"(?:{abbrev3})\\.", context=f"{space_nl}?{digit}")
    rule(f"(?:{abbrev1})\\.", _repeat_period, context=sentence_end)
    rule(f"(?:{abbrev1})\\.", context="(?s:..)")
    rule(f"(?:{abbrev1})\\.", _repeat_period)
    rule(f"(?:{abbrev4})\\.")
    rule(abbrev4, context=space)
    rule(acro, context=space_nl)
    rule(f"{apostrophe}[0-9][0-9]", context=space_nl)
    rule(f"(?:{alnum}|\u00ad)+(?:\\.(?:{alnum}|\u00ad)+)*\\." + _words(
        "bat", "bmp", "c", "class", "cgi", "cpp", "dll", "docx?", "exe", "gif", "gz", "h",
        "html?", "jar", "java", "jpe?g", "mov", "mp3", "pdf", "php", "pl", "png", "ppt", "ps",
        "py", "sql", "tar", "txt", "wav", "x", "xml", "zip"), context=f"{space_nl}|[.?!,]")
    rule(f"{word}\\.", _no_soft_hyphen, context=insentence)
    rule(r"(?:\([0-9]{2,3}\)[ \u00a0]?|(?:\+\+?)?(?:[0-9]{2,4}[- \u00a0])?[0-9]{2,4}"
         r"[- \u00a0])[0-9]{3,4}[- \u00a0]?[0-9]{3,5}|(?:(?:\+\+?)?[0-9]{2,4}\.)?[0-9]{2,4}"
         r"\.[0-9]{3,4}\.[0-9]{3,5}",
         lambda text: _parentheses(text.replace(" ", "\u00a0")))
    rule(r"[<>]?[:;=][-o*']?[()DPdpO\\{@|\[\]]", _parentheses, context="[^A-Za-z0-9]")
    asian_eye = r"[-^x=~<>']"
    rule(rf"{asian_eye}_{asian_eye}|\({asian_eye}[_.]?{asian_eye}\)"
         r"|\([\^x=~<>']-[\^x=~<>'`]\)", _parentheses)
    rule(r"\"|(?i:&quot;)", _opening_quote, context="[A-Za-z0-9$]")
    rule(r"\"|(?i:&quot;)", _closing_quote)
    rule("\x7f", lambda text: None)
    rule(r"\[", lambda text: "-LSB-")
    rule(r"\]", lambda text: "-RSB-")
    rule(r"\{", lambda text: "-LCB-")
    rule(r"\}", lambda text: "-RCB-")
    rule(r"\(", lambda text: "-LRB-")
    rule(r"\)", lambda text: "-RRB-")
    rule(r"(?i:&lt;)", lambda text: "<")
    rule(r"(?i:&gt;)", lambda text: ">")
    rule(r"<|>")
    rule(r"-+", lambda text: "--" if 3 <= len(text) <= 4 else text)
    rule(r"\.{3,5}|(?:\.[ \u00a0]){2,4}\.|[\u0085\u2026]", lambda text: "...")
    rule(r"@+|#+|_+")
    rule(r"\*+|(?:\\\*){1,3}")
    rule(insentence)
    rule(r"[?!]+")
    rule("[.\u00a1\u00bf\u037e\u0589\u061f\u06d4\u0700-\u0702\u07fa\u3002]")
    rule("=")
    rule("/")
    htthing = f"[A-Za-z0-9][A-Za-z0-9.,\u00ad]*(?:-(?:[A-Za-z0-9\u00ad]+|(?:{acro2})\\.))+"
    rule(f"{htthing}\\.", _no_soft_hyphen, context=insentence)
    rule(htthing, _no_soft_hyphen)
    rule(f"{thing}\\.", context=insentence)
    rule(thing)
    thinga = r"[A-Z]+(?:(?:[+&]|(?i:&amp;))[A-Z]+)+"
    rule(f"{thinga}\\.", _ampersand, context=insentence)
    rule(thinga, _ampersand)
    rule("'", _opening_quote, context="[A-Za-z][^ \t\n\r\u00a0]")
    rule(redaux, _closing_quote)
    rule(f"{apostrophe}|''|[`\u2018\u2019\u201a\u201b\u201c\u201d\u0091\u0092\u0093\u0094"
         f"\u201e\u201f\u2039\u203a\u00ab\u00bb]{{1,2}}", _closing_quote)
    rule(r"<<|>>")
    rule(r"[+%&~^|\\\u00a6\u00a7\u00a8\u00a9\u00ac\u00ae\u00af\u00b0-\u00ba\u00d7\u00f7"
         r"\u0387\u05be\u05c0\u05c3\u05c6\u05f3\u05f4\u0600-\u0603\u0606-\u060a\u060c\u0614"
         r"\u061b\u061e\u066a\u066d\u0703-\u070d\u07f6-\u07f8\u0964\u0965\u0e4f\u1fbd\u2016"
         r"\u2017\u2020-\u2023\u2030-\u2038\u203b\u203e-\u2042\u2044\u207a-\u207f"
         r"\u208a-\u208e\u2100-\u214f\u2190-\u21ff\u2200-\u2bff\u3012\u30fb\uff01-\uff0f"
         r"\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]")
    rule(f"\0|{space}+|[\u200b\u200e\u200f\ufeff]", lambda text: None)
    rule(newline, lambda text: "\n")
    rule(r"(?i:&nbsp;)", lambda text: None)
    return [(regex.compile(_caseless(pattern), regex.POSIX), action)
            for pattern, action in rules]


def _same(text: str) -> str:
    return text


def _no_soft_hyphen(text: str) -> str:
    return text.replace("\u00ad", "") or "-"


def _ampersand(text: str) -> str:
    return re.sub("(?i)&amp;", "&", text)


def _opening_quote(text: str) -> str:
    return _latex_quotes(text, True)


def _closing_quote(text: str) -> str:
    return _latex_quotes(text, False)


def _latex_quotes(text: str, probably_left: bool) -> str:
    """PTB3's LaTeX quotes: ` and `` open, ' and '' close; the curly ones by their shape."""
    if probably_left:
        text = re.sub("(?i)&apos;|'", "`", text)
        text = re.sub('(?i)"|&quot;', "``", text)
    else:
        text = re.sub("(?i)&apos;", "'", text)
        text = re.sub('(?i)"|&quot;', "''", text)
    text = re.sub("[\u0091\u2018\u201b\u2039]", "`", text)
    text = re.sub("[\u0092\u2019\u203a]", "'", text)
    text = re.sub("[\u0093\u201c\u00ab]", "``", text)
    return re.sub("[\u0094\u201d\u00bb]", "''", text)


def _fraction(text: str) -> str:
    return {"\u00bc": "1/4", "\u00bd": "1/2", "\u00be": "3/4", "\u2153": "1/3",
            "\u2154": "2/3"}.get(text, text)


def _currency(text: str) -> str:
    if text == "\u00a2":
        return "cents"
    if text == "\u00a3":
        return "#"
    return "$" if text in "\u0080\u00a4\u20a0\u20ac" else text


def _parentheses(text: str) -> str:
    return text.replace("(", "-LRB-").replace(")", "-RRB-")


def _acronym(text: str) -> str:
    """An acronym before a word that starts a sentence: "U.S." keeps its period and the
    period is read again; a single letter ("I.") gives its period up."""
    return text[:-1] if len(text) == 2 else text


def _repeat_period(text: str) -> str:
    """An abbreviation that also ends the sentence: the token keeps its period, and the
    period is read again as a token of its own."""
    return text


def rules_ready() -> bool:
    """Whether this process has compiled the rules (the lexer's start-up cost) already."""
    return _rules.cache_info().currsize > 0


@cache
def _rules_starting_with(char: str) -> list[Rule]:
    """The rules, in order, that have a match starting with `char` (`char` alone is a
    partial match): the only ones worth trying where the text holds `char`."""
    return [(pattern, action) for pattern, action in _rules()
            if pattern.match(char, partial=True) is not None]


def lex(text: str) -> list[str]:
    """PTBLexer's tokens of `text` (newlines as "\\n" tokens), before lower-casing."""
    tokens: list[str] = []
    position, end = 0, len(text)
    while position < end:
        best_length, best_token, best_action = 0, "", None
        for pattern, action in _rules_starting_with(text[position]):
            match = pattern.match(text, position)
            if match is not None and match.end() - position > best_length:
                best_length, best_token, best_action = (match.end() - position,
                                                        match.group("token"), action)
        if best_action is None:  # untokenizable: PTBTokenizer deletes it
            position += 1
            continue
        token = best_action(best_token)
        position += len(best_token) - (best_action in (_repeat_period, _acronym))
        if token is not None:
            tokens.append(token)
    return tokens
