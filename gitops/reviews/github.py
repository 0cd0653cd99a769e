"""The few GitHub REST calls reviews need: find, open, update and close a pull request.

The token comes from the environment variable ``reviews.tokenFromEnv`` names; it is sent
only in the ``Authorization`` header and never appears in a message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests

from runner.errors import SeshatError

__all__ = ["ForgeError", "GitHub", "PullRequest"]


class ForgeError(SeshatError):
    """A forge's API refused or failed a request (the message names the call, never a token);
    ``status`` is the HTTP status it answered, None when it did not answer."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class PullRequest:
    number: int
    url: str
    state: str


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

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call on the repository's API (``path`` below ``/repos/OWNER/NAME``); its JSON."""
        url = f"{self.api}/repos/{self.repository}{path}"
        try:
            response = self.session.request(method, url, timeout=self.timeout, **kwargs)
        except requests.RequestException as error:
            raise ForgeError(f"GitHub {method} {path}: {type(error).__name__}") from None
        if response.status_code >= 300:
            raise ForgeError(
                f"GitHub {method} {path}: HTTP {response.status_code}", response.status_code
            )
        return response.json() if response.content else None

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

    def comment_bodies(self, number: int, pages: int = 10) -> list[str]:
        """The bodies of the comments on pull request ``number`` (at most ``pages`` pages of
        100, oldest first)."""
        bodies: list[str] = []
        for page in range(1, pages + 1):
            found = self._call(
                "GET",
                f"/issues/{number}/comments",
                params={"per_page": "100", "page": str(page)},
            )
            items = found if isinstance(found, list) else []
            bodies += [str(item.get("body") or "") for item in items if isinstance(item, dict)]
            if len(items) < 100:
                break
        return bodies

    def comment(self, number: int, body: str) -> None:
        self._call("POST", f"/issues/{number}/comments", json={"body": body})

    def close(self, branch: str, comment: str) -> PullRequest | None:
        current = self.find_open(branch)
        if current is None:
            return None
        self._call("POST", f"/issues/{current.number}/comments", json={"body": comment})
        item = self._call("PATCH", f"/pulls/{current.number}", json={"state": "closed"})
        return PullRequest(int(item["number"]), str(item["html_url"]), str(item["state"]))
