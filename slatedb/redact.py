"""Store URLs as messages, reprs, reports, CLI output and log lines show them: without secrets.

An S3 URL may carry credentials as query parameters (``s3://bkt/db?access_key_id=K&
secret_access_key=S``, docs/objstore.md) and any URL a user-info part (``scheme://USER:PASS@host``,
refused at the open but echoed by the refusal). :func:`shown_url` replaces the user-info and the
values of the secret parameters by ``***``; the URL itself (``store.url``) keeps them, since it
opens sibling databases (clones, shards) with the same credentials. No imports beyond the
standard library: :mod:`slatedb.errors` and every layer use it.
"""

from __future__ import annotations

import re
import urllib.parse

#: URL parameters whose values are never shown (compared case-insensitively).
SECRET_PARAMETERS = frozenset({"secret_access_key", "session_token", "aws_secret_access_key", "aws_session_token",
                               "password", "token", "secret"})

_USERINFO = re.compile(r"(://)[^/?#@]*@")
_SECRET_VALUE = re.compile(r"(?i)([?&](?:" + "|".join(sorted(SECRET_PARAMETERS)) + r")=)[^&#\s'\"]*")


def shown_url(url: object) -> str:
    """``url`` with its user-info and secret parameter values replaced by ``***`` (a parameter
    value that is itself a URL, such as ``endpoint_url``, loses its user-info too). Never raises:
    a non-string is shown as ``str()`` of it, and a URL that does not parse is redacted by pattern."""
    text = url if isinstance(url, str) else str(url)
    if "@" not in text and "=" not in text:
        return text  # nothing to hide (every file:// and memory:// URL without a query)
    try:
        parsed = urllib.parse.urlsplit(text)
    except ValueError:  # an unclosed '[' in the host
        return _SECRET_VALUE.sub(r"\1***", _USERINFO.sub(r"\1***@", text))
    netloc = parsed.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    parts = []
    for part in parsed.query.split("&"):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if key.lower() in SECRET_PARAMETERS:
            value = "***"
        elif "@" in value:
            value = _USERINFO.sub(r"\1***@", urllib.parse.unquote(value))
        parts.append(f"{key}{sep}{value}")
    return urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, "&".join(parts), parsed.fragment))


def redact_text(text: str) -> str:
    """Every URL-looking secret in free ``text`` (a log line, an error from a library) hidden:
    user-info after ``://`` and the values of the secret parameters."""
    if "://" not in text and "=" not in text:
        return text
    return _SECRET_VALUE.sub(r"\1***", _USERINFO.sub(r"\1***@", text))
