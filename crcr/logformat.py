"""Log lines that say what happened, not what a caller wanted them to say: every control
character in a formatted message (a newline in a token's kid, a carriage return in a job name) is
escaped, so one record is always one line and nobody can forge another."""

import logging

_ESCAPES = {i: f"\\x{i:02x}" for i in [*range(0x20), 0x7F, 0x85]}
_ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", 0x2028: "\\u2028", 0x2029: "\\u2029"})


def one_line(text: str) -> str:
    return text.translate(_ESCAPES)


class EscapingFormatter(logging.Formatter):
    """logging.Formatter whose message part is escaped (tracebacks keep their own lines)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = one_line(record.message)
        return super().formatMessage(record)
