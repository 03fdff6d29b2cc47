"""A thin client of the platform's JSON API."""

from __future__ import annotations

from dataclasses import dataclass, field

import requests


class ApiError(RuntimeError):
    def __init__(self, status: int, detail: str, retry_after: float | None = None):
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail, self.retry_after = status, detail, retry_after


@dataclass
class Client:
    url: str
    token: str = ""
    timeout_s: float = 30.0
    session: requests.Session = field(default_factory=requests.Session)

    def _call(self, method: str, path: str, **kwargs) -> dict | list:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        response = self.session.request(
            method, self.url.rstrip("/") + "/api" + path, headers=headers, timeout=self.timeout_s, **kwargs
        )
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text[:500]
            retry = response.headers.get("Retry-After")
            raise ApiError(response.status_code, str(detail), float(retry) if retry else None)
        return response.json()

    def problems(self) -> list[dict]:
        return self._call("GET", "/problems")

    def submit(self, **payload) -> dict:
        return self._call("POST", "/submissions", json=payload)

    def submission(self, submission_id: int) -> dict:
        return self._call("GET", f"/submissions/{submission_id}")
