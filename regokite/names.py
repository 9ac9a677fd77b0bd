"""Kubernetes' rules for names and labels (apimachinery's `validation` package), with its messages.

Gatekeeper refuses a constraint whose name is not a DNS subdomain and a
selector whose keys, values or operators the API server would refuse; the
messages are apimachinery's, so they read as the API server's.
"""

from __future__ import annotations

import re

_DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = _DNS_LABEL + "(\\." + _DNS_LABEL + ")*"
_LABEL_KEY = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = f"({_LABEL_KEY})?"
_KEY_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)


def regex_error(message: str, pattern: str, *examples: str) -> str:
    """apimachinery's RegexError: the rule, examples, and the regex."""
    shown = "".join(f"'{e}', " if i == 0 else f" or '{e}', " for i, e in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def dns1123_subdomain_errors(value: str) -> list[str]:
    errors = ["must be no more than 253 bytes"] if len(value.encode()) > 253 else []
    if re.fullmatch(DNS_SUBDOMAIN, value) is None:
        message = (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character"
        )
        errors.append(regex_error(message, DNS_SUBDOMAIN, "example.com"))
    return errors


def label_key_errors(value: str) -> list[str]:
    """IsQualifiedName: an optional DNS subdomain prefix and '/', then a name of at most 63 bytes."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + regex_error(_KEY_MESSAGE, _LABEL_KEY, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errors = []
    if len(parts) == 2:
        if not parts[0]:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {m}" for m in dns1123_subdomain_errors(parts[0])]
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errors.append("name part must be no more than 63 bytes")
    if re.fullmatch(_LABEL_KEY, name) is None:
        errors.append("name part " + regex_error(_KEY_MESSAGE, _LABEL_KEY, "MyName", "my.name", "123-abc"))
    return errors


def label_value_errors(value: str) -> list[str]:
    errors = ["must be no more than 63 bytes"] if len(value.encode()) > 63 else []
    if re.fullmatch(_LABEL_VALUE, value) is None:
        message = "a valid label must be an empty string or " + _KEY_MESSAGE
        errors.append(regex_error(message, _LABEL_VALUE, "MyValue", "my_value", "12345"))
    return errors
