"""The PostgreSQL oracle: ``pg_dump --schema-only`` text, normalized and compared.

Normalization removes only what names the database or the run: the header and footer
comments, the ``\\restrict``/``\\unrestrict`` lines (their key is fixed anyway), and the
database's own name. GRANT lines inside one ACL entry are sorted, because pg_dump writes
them in the order of the ``aclitem`` array, which is the order the grants were made in.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

__all__ = [
    "Dump",
    "EntryKey",
    "appended_only",
    "column_list",
    "column_names",
    "compare",
    "normalize",
    "parse",
    "subset_problems",
    "survival_problems",
]

_DROP_LINE = re.compile(
    r"^(-- (PostgreSQL database dump( complete)?|Dumped (from database|by pg_dump) version .*)"
    r"|\\(un)?restrict .*)$"
)
_HEADER = re.compile(r"^-- (?:Name: (?P<name>.*?); )?Type: (?P<type>.*?); Schema: (?P<schema>.*?);")
_SORTED_TYPES = {"ACL", "DEFAULT ACL"}
_LINE_SUBSET_TYPES = {"TABLE", "ACL", "DEFAULT ACL"}

EntryKey = tuple[str, str, str]  # (type, schema, name)
_ACL_LINE = re.compile(
    r"^(?:ALTER DEFAULT PRIVILEGES .*?)?(?:GRANT|REVOKE)\b.*\b(?:TO|FROM) "
    r'(?P<role>"(?:[^"]|"")+"|\S+?)(?: WITH GRANT OPTION)?;$'
)


@dataclass(frozen=True, slots=True)
class Dump:
    """A normalized dump: its text and its entries by (type, schema, name)."""

    text: str
    entries: dict[EntryKey, str]


def parse(text: str) -> dict[EntryKey, str]:
    """Split normalized dump text into entries keyed by pg_dump's ``-- Name: …`` headers."""
    entries: dict[EntryKey, list[str]] = {("", "", "(preamble)"): []}
    key: EntryKey = ("", "", "(preamble)")
    lines = text.split("\n")
    for index, line in enumerate(lines):
        match = _HEADER.match(line)
        if match:
            key = (match["type"], match["schema"], match["name"] or "")
            while key in entries:  # pg_dump may repeat a header (e.g. two COMMENTs)
                key = (key[0], key[1], key[2] + "'")
            entries[key] = []
            continue
        if line == "--" and (
            (index + 1 < len(lines) and _HEADER.match(lines[index + 1]))
            or (index > 0 and _HEADER.match(lines[index - 1]))
        ):
            continue
        entries[key].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in entries.items()}


def _acl_role(line: str) -> str | None:
    """The role a dump's GRANT/REVOKE line names (``PUBLIC`` as such), else None."""
    match = _ACL_LINE.match(line)
    if match is None:
        return None
    role = match["role"]
    return role[1:-1].replace('""', '"') if role.startswith('"') else role


def normalize(raw: str, dbname: str, roles: frozenset[str] | None = None) -> Dump:
    """Normalize raw ``pg_dump`` output (see the module docstring). With ``roles`` (a case's
    ``managed_roles``), ACL lines naming any other role are left out, and ACL entries left
    empty with them: the engine does not manage those roles' privileges."""
    kept = [line for line in raw.split("\n") if not _DROP_LINE.match(line)]
    text = "\n".join(kept).replace(dbname, "<database>")
    entries = parse(text)
    for key, body in list(entries.items()):
        if key[0] in _SORTED_TYPES:
            lines = [line for line in body.split("\n") if line.strip()]
            if roles is not None:
                lines = [line for line in lines if _acl_role(line) in roles]
                if not lines:
                    del entries[key]
                    continue
            entries[key] = "\n".join(sorted(lines))
    if roles is not None:  # an entry left last by a removed one keeps the footer's "--"
        entries = {k: re.sub(r"(\n--)+$", "", body) for k, body in entries.items()}
    rendered = "\n\n".join(
        (f"-- {k[0]} {k[1]} {k[2]}\n" if k[0] else "") + body for k, body in entries.items()
    )
    return Dump(re.sub(r"\n{3,}", "\n\n", rendered).strip() + "\n", entries)


def _label(key: EntryKey) -> str:
    kind, schema, name = key
    return f"{kind} {schema + '.' if schema not in ('', '-') else ''}{name}"


def _body_lines(body: str) -> list[str]:
    return [line.strip().rstrip(",") for line in body.split("\n") if line.strip()]


def column_names(body: str) -> set[str]:
    """Column (and table-constraint) names of a ``CREATE TABLE`` entry body."""
    names: set[str] = set()
    inside = False
    for raw in body.split("\n"):
        line = raw.strip()
        if line.startswith("CREATE ") and line.endswith("("):
            inside = True
            continue
        if not inside:
            continue
        if line.startswith(")"):
            inside = False
            continue
        match = re.match(r'(CONSTRAINT\s+)?("(?:[^"]|"")+"|\S+)', line)
        if match:
            names.add((match.group(1) or "").strip() + " " + match.group(2))
    return names


def column_list(body: str) -> list[str]:
    """The column names of a ``CREATE TABLE`` entry body, in order (no constraints)."""
    return sorted(
        (n for n in column_names(body) if not n.startswith("CONSTRAINT")),
        key=lambda n: _column_position(body, n),
    )


def _column_position(body: str, name: str) -> int:
    for index, line in enumerate(body.split("\n")):
        if line.strip().startswith(name.strip() + " "):
            return index
    return -1


def appended_only(before: str, after: str, desired: str) -> bool:
    """Whether ``after`` is ``before``'s columns followed by the new ones in desired order.

    That is what ``ALTER TABLE … ADD COLUMN`` can reach: it only appends. So a column
    order that differs from desired's is then unreachable without rebuilding the table,
    not a wrong statement order.
    """
    wanted = column_list(desired)
    kept = [c for c in column_list(before) if c in wanted]
    added = [c for c in wanted if c not in kept]
    return column_list(after) == kept + added


def compare(a: Dump, b: Dump, limit: int = 80, before: Dump | None = None) -> tuple[str, str]:
    """(summary, unified diff) of two dumps; ("", "") when they are identical.

    With ``before`` (A before the apply), a column-order-only difference says whether the
    new columns were appended in desired order ("appended") or not ("new columns
    reordered").
    """
    if a.text == b.text:
        return "", ""
    extra = [k for k in a.entries if k not in b.entries]
    missing = [k for k in b.entries if k not in a.entries]
    changed = [k for k in b.entries if k in a.entries and a.entries[k] != b.entries[k]]
    parts: list[str] = []
    if missing:
        parts.append("missing " + ", ".join(_label(k) for k in missing[:3]))
    if extra:
        parts.append("extra " + ", ".join(_label(k) for k in extra[:3]))
    if changed:
        labels = []
        for key in changed[:3]:
            note = ""
            if key[0] == "TABLE" and sorted(_body_lines(a.entries[key])) == sorted(
                _body_lines(b.entries[key])
            ):
                note = " (column order only)"
                if before is not None and key in before.entries:
                    appended = appended_only(before.entries[key], a.entries[key], b.entries[key])
                    how = "appended" if appended else "new columns reordered"
                    note = f" (column order only: {how})"
            labels.append(_label(key) + note)
        parts.append("differs " + ", ".join(labels))
    if not parts:
        parts.append("entry order differs")
    diff = list(
        difflib.unified_diff(
            b.text.split("\n"), a.text.split("\n"), "desired (B)", "applied (A)", lineterm="", n=2
        )
    )
    if len(diff) > limit:
        diff = [*diff[:limit], f"... ({len(diff) - limit} more diff lines)"]
    return "; ".join(parts), "\n".join(diff)


_PREAMBLE: EntryKey = ("", "", "(preamble)")


def _unframed(body: str) -> str:
    """An entry's body without the ``--`` line the footer leaves on the dump's last entry
    (which entry is last depends on what else the dump holds)."""
    return re.sub(r"(\s*\n--)+\s*$", "", body)


_GRANT = re.compile(r"^(?P<verb>GRANT|REVOKE) (?P<privileges>\S+) (?P<rest>(?:ON|ON [A-Z ]+) .*)$")


def _acl_lines(body: str) -> set[str]:
    """An ACL entry's lines, one per privilege: pg_dump writes what a role holds on an
    object in one line (``GRANT SELECT,INSERT ON ...``), so a subset is judged by privilege."""
    found: set[str] = set()
    for line in _body_lines(body):
        match = _GRANT.match(line)
        if match is None or "(" in match["privileges"]:
            found.add(line)
            continue
        for privilege in match["privileges"].split(","):
            found.add(f"{match['verb']} {privilege} {match['rest']}")
    return found


def subset_problems(a: Dump, b: Dump) -> list[str]:
    """What of B is not in A identically (tables, ACLs and the preamble's settings compare
    line by line: pg_dump writes ``SET default_table_access_method`` only when a dump holds
    a table, and the footer's ``--`` after whichever entry is last)."""
    problems: list[str] = []
    for key, body in b.entries.items():
        if key not in a.entries:
            problems.append(f"missing {_label(key)}")
        elif key[0] in _SORTED_TYPES:
            lacking = _acl_lines(body) - _acl_lines(a.entries[key])
            if lacking:
                problems.append(f"{_label(key)} lacks {sorted(lacking)[0]!r}")
        elif key[0] in _LINE_SUBSET_TYPES or key == _PREAMBLE:
            lacking = set(_body_lines(body)) - set(_body_lines(a.entries[key])) - {"--"}
            if lacking:
                problems.append(f"{_label(key)} lacks {sorted(lacking)[0]!r}")
        elif _unframed(a.entries[key]) != _unframed(body):
            problems.append(f"differs {_label(key)}")
    return problems


def survival_problems(before: Dump, after: Dump, b: Dump) -> list[str]:
    """Objects (and columns) of the starting schema that are not desired but vanished."""
    problems: list[str] = []
    for key, body in before.entries.items():
        if key in b.entries:
            if key[0] == "TABLE" and key in after.entries:
                kept = column_names(b.entries[key])
                lost = column_names(body) - kept - column_names(after.entries[key])
                problems += [f"{_label(key)} lost {name.strip()}" for name in sorted(lost)]
            continue
        if key not in after.entries:
            problems.append(f"dropped {_label(key)}")
    return problems
