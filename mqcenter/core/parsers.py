"""The API's JSON parser: strict JSON, and hostile bodies become 400s, not crashes."""

from __future__ import annotations

import json
import re
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        raw = stream.read() if stream is not None else b""
        if not raw:
            raise ParseError("The request body is empty; send a JSON object.")
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError as exc:
            raise ParseError("The body is not valid UTF-8.") from exc
        except RecursionError as exc:
            raise ParseError("The JSON body is nested too deeply.") from exc
        except ValueError as exc:
            raise ParseError(f"The body is not valid JSON: {exc}") from exc
        if _SURROGATE_ESCAPE.search(raw):
            _reject_lone_surrogates(data)
        return data


# `\ud800`-`\udfff` escapes: a valid pair decodes to one character, a lone one to a string
# that is not Unicode text and that no UTF-8 column can store. Only bodies holding such an
# escape (rare) pay for the check.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _reject_lone_surrogates(data: Any) -> None:
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ParseError("The body holds a lone UTF-16 surrogate escape (\\ud800-\\udfff); send Unicode text.") from exc
    except RecursionError as exc:
        raise ParseError("The JSON body is nested too deeply.") from exc
