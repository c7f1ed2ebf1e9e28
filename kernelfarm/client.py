"""A small typed client of the REST API (used by the CLI and by tests)."""

from __future__ import annotations

from typing import Any

import httpx


class ApiError(Exception):
    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail = status, detail


class Client:
    def __init__(self, base_url: str, token: str | None, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(0, f"cannot reach the API at {self.http.base_url}: {exc}") from None
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise ApiError(response.status_code, detail)
        return response.json()

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/jobs", json=body)

    def job(self, job_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/jobs/{job_id}")

    def jobs(self, **filters: Any) -> dict[str, Any]:
        params = {k: v for k, v in filters.items() if v is not None}
        return self._call("GET", "/v1/jobs", params=params)

    def trials(self, job_id: str, **params: Any) -> dict[str, Any]:
        return self._call("GET", f"/v1/jobs/{job_id}/trials", params=params)

    def all_trials(self, job_id: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            page = self.trials(job_id, limit=1000, offset=len(items))
            items += page["items"]
            if len(items) >= page["total"] or not page["items"]:
                return items

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/jobs/{job_id}/cancel")

    def best(self, kernel: str, gpu: str, problem: dict[str, Any]) -> dict[str, Any]:
        params: list[tuple[str, str]] = [("kernel", kernel), ("gpu", gpu)]
        params += [("problem", f"{k}={v}") for k, v in problem.items()]
        return self._call("GET", "/v1/best", params=params)

    def workers(self, include_all: bool = False) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/workers", params={"all": include_all})

    def gpu_models(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/gpu-models")

    def kernels(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/kernels")

    def store_profile(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/profiles", json=body)

    def profiles(self, gpu_model: str | None = None) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/profiles", params={"gpu_model": gpu_model} if gpu_model else {})

    def profile(self, profile_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/profiles/{profile_id}")
