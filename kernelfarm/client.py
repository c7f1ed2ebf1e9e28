"""A small typed client of the REST API (used by the CLI and by tests)."""

from __future__ import annotations

from typing import Any

import httpx


def human_detail(detail: Any) -> str:
    """An error body's ``detail`` as one line: FastAPI's list of validation errors becomes
    "field: message; field: message" (the location without its "body"/"query" prefix)."""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, dict):
        for key in ("message", "detail", "reason"):
            if key in detail:
                return human_detail(detail[key])
        if "errors" in detail:
            return human_detail(detail["errors"])
    if isinstance(detail, list) and all(isinstance(item, dict) and "msg" in item for item in detail):
        parts = []
        for item in detail:
            location = [str(p) for p in item.get("loc", ()) if p not in ("body", "query", "path")]
            parts.append(f"{'.'.join(location)}: {item['msg']}" if location else str(item["msg"]))
        return "; ".join(parts)
    return str(detail)


class ApiError(Exception):
    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"HTTP {status}: {human_detail(detail)}" if status else human_detail(detail))
        self.status, self.detail = status, detail

    @property
    def message(self) -> str:
        """One line for people (no status code for an unreachable API)."""
        return human_detail(self.detail)


class Client:
    def __init__(self, base_url: str, token: str | None, timeout: float = 30.0, unreachable_hint: str = "") -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)
        self.unreachable_hint = unreachable_hint  # appended to "cannot reach the API" (e.g. run `kernelfarm up`)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(0, f"cannot reach the API at {self.http.base_url}{self.unreachable_hint}: {exc}") from None
        except ValueError as exc:  # nothing was sent: a body or parameter the request cannot carry (NaN, non-UTF-8)
            raise ApiError(0, f"cannot send this request: {exc}") from None
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

    def best(self, kernel: str, gpu: str, problem: dict[str, Any], objective: str = "time") -> dict[str, Any]:
        params: list[tuple[str, str]] = [("kernel", kernel), ("gpu", gpu), ("objective", objective)]
        params += [("problem", f"{k}={v}") for k, v in problem.items()]
        return self._call("GET", "/v1/best", params=params)

    def workers(self, include_all: bool = False) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/workers", params={"all": include_all})

    def gpu_models(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/gpu-models")

    def kernels(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/kernels")

    def kernel(self, name: str, version: int | None = None) -> dict[str, Any]:
        params = {"version": version} if version is not None else {}
        return self._call("GET", f"/v1/kernels/{name}", params=params)

    def kernel_versions(self, name: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/v1/kernels/{name}/versions")

    def upload_kernel(self, manifest: tuple[str, bytes], files: list[tuple[str, bytes]]) -> dict[str, Any]:
        """POST /v1/kernels: the manifest (file name, bytes) and the files it names."""
        parts = [("manifest", manifest), *(("files", item) for item in files)]
        return self._call("POST", "/v1/kernels", files=parts)

    def store_profile(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/profiles", json=body)

    def profiles(self, gpu_model: str | None = None) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/profiles", params={"gpu_model": gpu_model} if gpu_model else {})

    def profile(self, profile_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/profiles/{profile_id}")
