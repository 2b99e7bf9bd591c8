"""Text that can be written as UTF-8, whatever bytes it came from.

A file name that is not UTF-8 reaches Python as a string with lone surrogates
(`os.listdir`'s surrogateescape, or agentd's JSON escaping of the same). Such a
string cannot be encoded: written to the transcript or sent to the model, it
would end the run with a traceback. `utf8_safe` shows those bytes as `\\xNN`.
"""

from __future__ import annotations


def utf8_safe(text: str) -> str:
    """`text`, with every lone surrogate replaced by the backslash escape of the byte(s) it stands for."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        raw = text.encode("utf-8", "surrogateescape")  # the bytes os.fsdecode turned into U+DC80..U+DCFF
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")  # any other lone surrogate
    return raw.decode("utf-8", "backslashreplace")
