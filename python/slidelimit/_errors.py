"""The exceptions: one base, one subclass per core error code."""

from __future__ import annotations

from typing import ClassVar


class Error(Exception):
    """Any slidelimit error. `code` is core's stable code, `field` the
    argument at fault (or None), `message` names it."""

    code: ClassVar[str] = ""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message, field)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, field={self.field!r})"


class InvalidArgument(Error, ValueError):
    """A policy, tenant, cost or time that breaks the contract's rules."""

    code = "invalid_argument"


class InvalidType(InvalidArgument, TypeError):
    """An argument of the wrong Python type (a str where an int belongs,
    None for one that is required): an InvalidArgument that is also a
    TypeError, as Python's own checks raise it."""


class Unavailable(Error):
    """Redis could not be reached or did not answer in time: never a decision."""

    code = "unavailable"


class ScriptError(Error):
    """Redis ran the script and it failed, or refused the call."""

    code = "script_error"


class WrongType(Error):
    """The key holds a value the algorithm does not use."""

    code = "wrong_type"


class MalformedReply(Error):
    """The reply was not the five integers the contract promises."""

    code = "malformed_reply"


class PermissionDenied(Error):
    """The server refused the command for this user (ACL)."""

    code = "permission_denied"


class Internal(Error):
    """A bug in slidelimit itself."""

    code = "internal"


BY_CODE: dict[str, type[Error]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        Unavailable,
        ScriptError,
        WrongType,
        MalformedReply,
        PermissionDenied,
        Internal,
    )
}
