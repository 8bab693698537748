"""One self-contained HTML file from the view data: template, styles, scripts and data inlined.

The page needs no server and no network: its Content-Security-Policy allows no connection,
no outside resource and only its own inline script (by sha256), so even an injected
``<img onerror>`` or ``<script>`` could not run. Nothing from the stream reaches the page as
markup anyway: the data travels as one JSON block whose ``<``, ``>`` and ``&`` are escaped
(``\\u003c``…), which the scripts parse once and show through ``textContent`` only; the title is
HTML-escaped here.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from importlib import resources
from typing import Any

__all__ = ["SCRIPTS", "embed_json", "render_page"]

#: The page's scripts (``assets/``), in load order; concatenated into one inline script.
SCRIPTS = ("dom.js", "tree.js", "prompt.js", "steps.js", "memory.js", "compare.js", "main.js")

_SLOT = re.compile(r"\{\{([A-Z]+)\}\}")
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _asset(name: str) -> str:
    return resources.files("rizz.lab.view").joinpath("assets", name).read_text(encoding="utf-8")


def embed_json(data: Any) -> str:
    """``data`` as JSON safe inside ``<script type="application/json">``: no ``</script>``,
    ``<!--`` or line separator can end or change the block (they are written as ``\\uXXXX``,
    which JSON.parse reads back unchanged)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return re.sub("[<>&\u2028\u2029]", lambda m: _JSON_ESCAPES[m.group(0)], text)


def render_page(data: dict[str, Any], title: str) -> str:
    """The HTML text of the view of ``data`` (:func:`rizz.lab.view.view_data`) titled ``title``."""
    script = "(function () {\n'use strict';\n" + "\n".join(_asset(n) for n in SCRIPTS) + "\n})();\n"
    sha = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    csp = (f"default-src 'none'; script-src 'sha256-{sha}'; style-src 'unsafe-inline'; img-src data:; "
           "connect-src 'none'; form-action 'none'; base-uri 'none'")
    slots = {"TITLE": html.escape(title), "CSP": html.escape(csp), "CSS": _asset("view.css"), "DATA": embed_json(data), "JS": script}
    return _SLOT.sub(lambda m: slots[m.group(1)], _asset("view.html"))
