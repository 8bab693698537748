"""A Griffe extension for the API reference (mkdocs.yml): rizz's docstrings are Google-style
with a few reStructuredText habits; this rewrites those into Markdown as the docstrings are
loaded (the source is not changed).

- ``:class:`~a.b.C``` (any role) becomes ```C```; without ``~`` the whole dotted name stays.
- A paragraph that ends in ``::`` (a literal block follows) ends in ``:`` instead.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`]+)`")
_LITERAL = re.compile(r"::$", re.M)


def rst_to_markdown(text: str) -> str:
    text = _ROLE.sub(lambda m: "`" + (m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2)) + "`", text)
    text = re.sub(r"^\s*::\s*$", "", text, flags=re.M)
    return _LITERAL.sub(":", text)


class RstRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rst_to_markdown(obj.docstring.value)
