"""``metadata.time``: ISO 8601 time stamps read into canonical text and an instant (specs/stream-format.md).

The shell parses; the pure core only compares instants and shows the text (COMMON.md: no
clock or calendar in ``rizz/core``). The stream reader refuses a bad time with ``file:line``
(:mod:`rizz.formats.streams`); :func:`time_fields` gives the two ``StepInput`` fields.

Rules (``specs/stream-format.md``, "metadata.time"):

* A string is ISO 8601 as Python 3.11's ``date.fromisoformat`` / ``datetime.fromisoformat``
  read it: a date (``2026-05-24``), or a date and time with an optional offset
  (``2026-05-24T09:30``, ``2026-05-24T09:30:00+02:00``, ``...Z``); basic forms
  (``20260524T093000Z``) too. Anything else is refused.
* A number is seconds since 1970-01-01T00:00:00 UTC (a Unix time), shown in UTC.
* **Naive times are UTC.** A date or date-time without an offset is read as UTC (a date as
  its midnight), never as the host's zone, so instants and prompts are the same under any
  ``TZ``. A source in another zone must write its offset.

Canonical text (what is logged, stored in ``ContextItem.time`` and shown in the prompt): a date
stays ``YYYY-MM-DD``; a date-time is ``datetime.isoformat()`` (``Z`` becomes ``+00:00``; naive
stays naive); a number becomes its UTC date-time with ``+00:00``. The *instant* orders items:
integer microseconds since the epoch, UTC (``ContextItem.instant_us``). No clock and no host
time zone is ever read.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta

__all__ = ["TIME_EXPECTED", "canonical_time", "instant_us", "time_fields"]

#: What a bad ``metadata.time`` is told it should be.
TIME_EXPECTED = (
    "an ISO 8601 date or date-time (e.g. 2026-05-24 or 2026-05-24T09:30:00+02:00; no offset = UTC) "
    "or a number of seconds since 1970-01-01 UTC"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def canonical_time(value: object) -> str:
    """Canonical ISO 8601 text of a ``metadata.time`` value (see the module docstring).

    Raises:
      ValueError: ``value`` is not an ISO 8601 string nor a finite number in years 1–9999.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"expected {TIME_EXPECTED}, got {type(value).__name__}")
    if isinstance(value, str):
        s = value.strip()
        if len(s) in (8, 10) and "T" not in s:
            try:
                return date.fromisoformat(s).isoformat()
            except ValueError:
                pass
        try:
            return datetime.fromisoformat(s).isoformat()
        except ValueError:
            raise ValueError(f"expected {TIME_EXPECTED}, got {value!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected {TIME_EXPECTED}, got {value!r}")
    try:
        return (_EPOCH + timedelta(seconds=value)).isoformat()
    except OverflowError:
        raise ValueError(f"expected {TIME_EXPECTED}, got {value!r} (outside years 1-9999)") from None


def instant_us(value: object) -> int:
    """Microseconds since 1970-01-01T00:00:00 UTC (an exact integer) of a ``metadata.time``
    value or its canonical text (naive = UTC).

    Raises ValueError for a value :func:`canonical_time` refuses."""
    dt = datetime.fromisoformat(canonical_time(value))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    d = dt - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def time_fields(value: object) -> dict[str, object]:
    """``{"time": canonical text, "instant_us": instant}`` of a ``metadata.time`` value, or both
    None for None: the keyword arguments of ``StepInput`` (``StepInput(..., **time_fields(t))``).

    Raises ValueError for a value :func:`canonical_time` refuses."""
    if value is None:
        return {"time": None, "instant_us": None}
    return {"time": canonical_time(value), "instant_us": instant_us(value)}
