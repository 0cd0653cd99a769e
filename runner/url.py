"""Database URLs: parsed once, connected from their parts, printed without credentials.

A URL is the one place a credential enters the runner, so it is parsed here, once, and
everything downstream works from the parts: drivers are given host, port, user, password and
database as separate values (never the URL text, which a driver might split differently), and
the only way to print a :class:`DatabaseURL` is :meth:`DatabaseURL.display`, which has no
password and no secret parameter in it (``str()`` is the same).

Parsing rules, for ``scheme://[user[:password]@]host[:port]/database[?name=value&...]``:

* the authority ends at the first ``/``, ``?`` or ``#``; inside it the user information ends
  at the **last** ``@`` (a raw ``@`` in a password is common and is read as written);
  ``/``, ``?`` and ``#`` in a password must be percent-encoded;
* ``user`` and ``password`` are percent-decoded; the host is a name, an IPv4 address, an
  IPv6 address in brackets, or a percent-encoded Unix socket directory;
* SQLite URLs have no authority: ``sqlite:///relative.db``, ``sqlite:////absolute.db``.

A malformed URL is refused with :class:`InvalidURL`, whose message says which part is wrong
and never repeats any of it (a fragment may be part of a password). The redactor learns
:meth:`DatabaseURL.secrets`: the password in every spelling plus the fragments any parser
might split it into at ``@ : / ? #``, so a driver that misreads a URL cannot print a piece
of the password either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Final
from urllib.parse import quote, unquote

from runner.errors import ConfigurationError

__all__ = [
    "DEFAULT_PORTS",
    "ENGINES",
    "SECRET_PARAMETERS",
    "DatabaseURL",
    "InvalidURL",
    "UnsupportedScheme",
    "fragments",
    "parse_url",
    "secrets_of_unreadable",
]

ENGINES: Final = {
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
}
"""URL scheme -> canonical engine: the one scheme table."""

SECRET_PARAMETERS: Final = frozenset({"password", "sslpassword", "passfile", "token", "secret"})
"""Query parameters whose values are credentials."""

DEFAULT_PORTS: Final = {"postgresql": 5432, "mysql": 3306}
MAX_URL: Final = 4096
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HOST = re.compile(r"[A-Za-z0-9._~-]+")
_SEPARATORS = re.compile(r"[@:/?#]")
_MIN_FRAGMENT = 3


class InvalidURL(ConfigurationError):
    """A database URL that cannot be read exactly. The message never quotes the URL."""


class UnsupportedScheme(InvalidURL):
    """A well-formed URL for an engine Seshat does not have."""


def _refuse(what: str) -> InvalidURL:
    return InvalidURL(f"the database URL is malformed: {what}")


def fragments(secret: str) -> list[str]:
    """The pieces of ``secret`` a URL parser could split out at ``@ : / ? #``: what comes
    before and after each such character, and the runs between them, when long enough to
    be worth masking (a one-character piece would mask every line it occurs in)."""
    cuts = [match.start() for match in _SEPARATORS.finditer(secret)]
    found = {part for part in _SEPARATORS.split(secret)}
    for cut in cuts:
        found |= {secret[:cut], secret[cut + 1 :]}
    return sorted(p for p in found if len(p) >= _MIN_FRAGMENT and p != secret)


@dataclass(frozen=True, slots=True)
class DatabaseURL:
    """A parsed database URL. ``str()`` and :meth:`display` never show a credential."""

    scheme: str
    engine: str
    user: str = ""
    password: str = field(default="", repr=False)
    host: str = ""
    port: int | None = None
    database: str = ""
    params: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    raw_password: str = field(default="", repr=False)  # as written, before percent-decoding

    def __str__(self) -> str:
        return self.display()

    def param(self, name: str) -> str | None:
        return dict(self.params).get(name)

    @property
    def server_host(self) -> str:
        """Where the server is: the host, or a ``host`` parameter (a socket directory)."""
        return self.host or (self.param("host") or "")

    def display(self) -> str:
        """The URL without its password or secret parameters: all that may be printed."""
        if self.engine == "sqlite":
            return f"{self.scheme}:///{quote(self.database, safe='/:')}"
        user = f"{quote(self.user, safe='')}@" if self.user else ""
        host = self.host
        if ":" in host:
            host = f"[{host}]"
        elif host.startswith("/"):
            host = quote(host, safe="")
        port = f":{self.port}" if self.port is not None else ""
        shown = [(k, v) for k, v in self.params if k.lower() not in SECRET_PARAMETERS]
        query = "?" + "&".join(f"{k}={quote(v, safe='/')}" for k, v in shown) if shown else ""
        return f"{self.scheme}://{user}{host}{port}/{quote(self.database, safe='')}{query}"

    def secrets(self) -> list[str]:
        """Every credential this URL carries, as written and decoded, and their fragments."""
        whole = [s for s in (self.password, self.raw_password) if s]
        whole += [v for k, v in self.params if k.lower() in SECRET_PARAMETERS and v]
        found = set(whole)
        for secret in whole:
            found |= set(fragments(secret))
        return sorted(found, key=lambda s: (-len(s), s))

    def with_database(self, database: str) -> DatabaseURL:
        """This server and credential, another database."""
        return replace(self, database=database)


def _host_and_port(hostport: str) -> tuple[str, int | None]:
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise _refuse("an IPv6 host opened with '[' is never closed")
        host, rest = hostport[1:end], hostport[end + 1 :]
        if not host or not all(c in "0123456789abcdefABCDEF:." for c in host):
            raise _refuse("the IPv6 host is not an address")
        if rest and not rest.startswith(":"):
            raise _refuse("unexpected characters after the IPv6 host")
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text_found = hostport.partition(":")
        port_text = port_text_found if colon else None
        host = unquote(host)
        if host and not host.startswith("/") and not _HOST.fullmatch(host):
            raise _refuse(
                "the host is not a name or an address (a password with '/', '?' or '#' "
                "must be percent-encoded)"
            )
    if port_text is None or port_text == "":
        if port_text == "":
            raise _refuse("the port after ':' is empty")
        return host, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536 or len(port_text) > 5:
        raise _refuse(
            "the port is not a number between 1 and 65535 (a password with '/', '?' or '#' "
            "must be percent-encoded)"
        )
    return host, int(port_text)


def _params(query: str) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    for pair in query.split("&") if query else []:
        if not pair:
            continue
        name, equals, value = pair.partition("=")
        name = unquote(name)
        if not equals or not _PARAMETER.fullmatch(name):
            raise _refuse("a query parameter is not name=value")
        if name in found:
            raise _refuse(f"the query parameter {name} is given twice")
        found[name] = unquote(value)
    return tuple(sorted(found.items()))


def parse_url(text: str) -> DatabaseURL:
    """Parse ``text`` (see the module docstring); :class:`InvalidURL` if it cannot be read
    exactly, :class:`UnsupportedScheme` for an engine Seshat does not have."""
    if len(text) > MAX_URL:
        raise _refuse(f"longer than {MAX_URL} characters")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise _refuse("it contains control characters (a line break?)")
    scheme, separator, rest = text.partition("://")
    if not separator or not _SCHEME.fullmatch(scheme):
        raise _refuse("a database URL starts with SCHEME:// (postgresql, mysql, sqlite)")
    scheme = scheme.lower()
    engine = ENGINES.get(scheme)
    if engine is None:
        supported = ", ".join(f"{s}://" for s in sorted(ENGINES))
        raise UnsupportedScheme(
            f"unsupported database URL scheme {scheme!r} (supported: {supported})"
        )
    if "#" in rest:
        raise _refuse("a fragment ('#') has no meaning in a database URL")
    end = len(rest)
    for stop in "/?":
        found = rest.find(stop)
        if found >= 0:
            end = min(end, found)
    authority, remainder = rest[:end], rest[end:]
    path, _, query = remainder.partition("?")
    userinfo, at, hostport = authority.rpartition("@")
    if not at:
        userinfo, hostport = "", authority
    raw_user, colon, raw_password = userinfo.partition(":")
    params = _params(query)
    if engine == "sqlite":
        if authority:
            raise InvalidURL(
                "a sqlite URL has no host: sqlite:///relative.db or sqlite:////absolute/path.db"
            )
        database = unquote(path[1:] if path.startswith("/") else path)
        return DatabaseURL(scheme, engine, database=database, params=params)
    host, port = _host_and_port(hostport)
    database = unquote(path.lstrip("/")) if path else ""
    return DatabaseURL(
        scheme,
        engine,
        user=unquote(raw_user),
        password=unquote(raw_password) if colon else "",
        host=host,
        port=port,
        database=database,
        params=params,
        raw_password=raw_password if colon else "",
    )


def secrets_of_unreadable(text: str) -> list[str]:
    """What to redact when ``text`` could not be parsed: everything after ``scheme://`` and
    its fragments (which of them is the password cannot be known)."""
    rest = text.partition("://")[2] or text
    return sorted({rest, *fragments(rest)}, key=lambda s: (-len(s), s))
