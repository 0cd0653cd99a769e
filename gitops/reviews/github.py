"""The few GitHub REST calls reviews need: find, open, update and close a pull request,
comment on it, and learn who the token publishes as.

The token comes from the environment variable ``reviews.tokenFromEnv`` names; it is sent
only in the ``Authorization`` header and never appears in a message.

Seshat's comments are told from everyone else's by their author, never by their text: a
hidden marker is public, anyone can copy it into a comment of their own. :meth:`GitHub.
identity` is who the token publishes as (the token's user, or a GitHub App installation's
bot user); :meth:`Author.wrote` says whether a comment's ``user`` is that identity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests

from runner.errors import SeshatError

__all__ = ["Author", "ForgeError", "GitHub", "PullRequest", "forge_json", "graphql_url"]


class ForgeError(SeshatError):
    """A forge's API refused or failed a request (the message names the call, never a token);
    ``status`` is the HTTP status it answered, None when it did not answer."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def forge_json(
    session: requests.Session, method: str, url: str, call: str, timeout: float, /, **kwargs: Any
) -> Any:
    """One request on a forge's API; its JSON (None for an empty body). A request that
    fails, a status of 300 or more, or a body that is not JSON is a :class:`ForgeError`
    naming the request as ``call`` (``GitHub GET /user``), never by its URL."""
    try:
        response = session.request(method, url, timeout=timeout, **kwargs)
    except requests.RequestException as error:
        raise ForgeError(f"{call}: {type(error).__name__}") from None
    if response.status_code >= 300:
        raise ForgeError(f"{call}: HTTP {response.status_code}", response.status_code)
    try:
        return response.json() if response.content else None
    except ValueError:
        raise ForgeError(f"{call}: not JSON") from None


@dataclass(frozen=True, slots=True)
class PullRequest:
    number: int
    url: str
    state: str


@dataclass(frozen=True, slots=True)
class Author:
    """Who publishes with a token: a forge's login (GitHub's ``login``, GitLab's
    ``username``) and its numeric id, where the forge said it."""

    login: str
    id: int | None = None

    def wrote(self, user: object) -> bool:
        """Whether ``user``, a comment's author as the API gives it (GitHub's ``user``,
        GitLab's ``author``), is this identity: the same login, and the same id when both
        are known."""
        if not isinstance(user, dict):
            return False
        login = user.get("login", user.get("username"))
        if not isinstance(login, str) or login.lower() != self.login.lower():
            return False
        return self.id is None or user.get("id") == self.id


def graphql_url(api_url: str) -> str:
    """GitHub's GraphQL endpoint beside the REST ``api_url`` (``https://api.github.com`` ->
    ``/graphql``; GitHub Enterprise's ``https://HOST/api/v3`` -> ``/api/graphql``)."""
    api = api_url.rstrip("/")
    return api.removesuffix("/v3") + "/graphql" if api.endswith("/api/v3") else api + "/graphql"


_VIEWER = "query { viewer { login databaseId } }"


class GitHub:
    def __init__(
        self,
        repository: str,
        token: str,
        api_url: str = "https://api.github.com",
        timeout: float = 30.0,
    ) -> None:
        self.repository = repository
        self.owner = repository.split("/", 1)[0]
        self.api = api_url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.headers.update(
            {
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "seshat",
            }
        )
        self._identity: Author | None = None
        self._identity_asked = False

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call on the repository's API (``path`` below ``/repos/OWNER/NAME``); its JSON."""
        return self._request(method, f"/repos/{self.repository}{path}", path, **kwargs)

    def _request(self, method: str, path: str, shown: str, **kwargs: Any) -> Any:
        """One call on ``path`` below the API's root (or a whole URL); its JSON. Errors name
        the call as ``shown``."""
        url = path if path.startswith("https://") or path.startswith("http://") else self.api + path
        return forge_json(
            self.session, method, url, f"GitHub {method} {shown}", self.timeout, **kwargs
        )

    def identity(self) -> Author | None:
        """Who this token publishes as, asked once: the token's user (``GET /user``), or,
        for a GitHub App installation token or the workflow's ``GITHUB_TOKEN`` (which
        ``/user`` refuses), the app's bot user ``<slug>[bot]`` as GraphQL's ``viewer``
        names it. None when neither answers: then no comment is taken for Seshat's."""
        if not self._identity_asked:
            self._identity_asked = True
            self._identity = self._user() or self._viewer()
        return self._identity

    def _user(self) -> Author | None:
        try:
            found = self._request("GET", "/user", "/user")
        except ForgeError:
            return None
        return _author(found, "login", "id")

    def _viewer(self) -> Author | None:
        try:
            found = self._request(
                "POST", graphql_url(self.api), "graphql viewer", json={"query": _VIEWER}
            )
        except ForgeError:
            return None
        data = found.get("data") if isinstance(found, dict) else None
        viewer = data.get("viewer") if isinstance(data, dict) else None
        return _author(viewer, "login", "databaseId")

    def comments(self, number: int, pages: int = 10) -> list[dict[str, Any]]:
        """The comments on pull request (or issue) ``number``, oldest first, as the API gives
        them (at most ``pages`` pages of 100)."""
        found: list[dict[str, Any]] = []
        for page in range(1, pages + 1):
            batch = self._call(
                "GET",
                f"/issues/{number}/comments",
                params={"per_page": "100", "page": str(page)},
            )
            items = batch if isinstance(batch, list) else []
            found += [item for item in items if isinstance(item, dict)]
            if len(items) < 100:
                break
        return found

    def own_comments(self, number: int, pages: int = 10) -> list[dict[str, Any]]:
        """The comments on ``number`` that this token's identity wrote, oldest first; none
        when the identity is unknown (a comment is never taken for Seshat's by its text)."""
        me = self.identity()
        if me is None:
            return []
        return [c for c in self.comments(number, pages) if me.wrote(c.get("user"))]

    def find_open(self, branch: str) -> PullRequest | None:
        found = self._call(
            "GET", "/pulls", params={"head": f"{self.owner}:{branch}", "state": "open"}
        )
        for item in found or []:
            return PullRequest(int(item["number"]), str(item["html_url"]), str(item["state"]))
        return None

    def open_or_update(self, branch: str, base: str, title: str, body: str) -> PullRequest:
        current = self.find_open(branch)
        if current is None:
            item = self._call(
                "POST", "/pulls", json={"title": title, "head": branch, "base": base, "body": body}
            )
        else:
            item = self._call(
                "PATCH", f"/pulls/{current.number}", json={"title": title, "body": body}
            )
        return PullRequest(int(item["number"]), str(item["html_url"]), str(item["state"]))

    def comment(self, number: int, body: str) -> None:
        self._call("POST", f"/issues/{number}/comments", json={"body": body})

    def close(self, branch: str, comment: str) -> PullRequest | None:
        current = self.find_open(branch)
        if current is None:
            return None
        self._call("POST", f"/issues/{current.number}/comments", json={"body": comment})
        item = self._call("PATCH", f"/pulls/{current.number}", json={"state": "closed"})
        return PullRequest(int(item["number"]), str(item["html_url"]), str(item["state"]))


def _author(found: object, login: str, key: str) -> Author | None:
    """The :class:`Author` an API answer names (``login`` and ``key``, the id's field)."""
    if not isinstance(found, dict) or not isinstance(found.get(login), str) or not found[login]:
        return None
    number = found.get(key)
    return Author(found[login], number if isinstance(number, int) else None)
