"""A small typed client of the REST API (used by the CLI and by tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from kernelfarm.core.exports import is_plain_file_name


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


_NOT_JSON = object()  # an answer that is not JSON
# What GET /v1/best/export and /v1/jobs/{id}/export answer for each text format (others: JSON).
EXPORT_MEDIA_TYPES = {"header": "text/x-c", "csv": "text/csv"}


def _media_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


def _json_of(response: httpx.Response) -> Any:
    """The body as JSON, or _NOT_JSON (another content type, or not parseable)."""
    if _media_type(response) != "application/json":
        return _NOT_JSON
    try:
        return response.json()
    except ValueError:
        return _NOT_JSON


class ApiError(Exception):
    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"HTTP {status}: {human_detail(detail)}" if status else human_detail(detail))
        self.status, self.detail = status, detail

    @property
    def message(self) -> str:
        """One line for people (no status code for an unreachable API)."""
        return human_detail(self.detail)


def segment(value: str, what: str, noun: str = "name") -> str:
    """``value`` as one path segment of a URL: percent-encoded ("/", "?", "#"...), dots too ("." and ".."
    were resolved away, and the request reached another route: "Not Found").

    Raises:
        ApiError: (status 0, nothing sent) ``value`` holds a "/", which the server decodes before routing
            (no name or id has one), or it is not UTF-8 text (an argument's invalid bytes).
    """
    if "/" in value:
        raise ApiError(0, f"no {what} has the {noun} {value!r} (a {what}'s {noun} has no '/')")
    try:
        return quoted_segment(value)
    except UnicodeEncodeError:
        raise ApiError(0, f"cannot send this request: the {what} {noun} {value!r} is not valid UTF-8 text") from None


def quoted_segment(value: str) -> str:
    """``value`` percent-encoded as one path segment, and a segment of dots only with its dots encoded
    too ("." and ".." would be resolved away: the request would reach another route). The CLI's and
    the SDK's clients both build paths with it; each says in its own terms what it refuses.

    Raises:
        UnicodeEncodeError: ``value`` is not UTF-8 text (an argument's invalid bytes).
    """
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if set(value) <= {"."} else quoted


def _object(data: Any) -> bool:
    return isinstance(data, dict)


def _array(data: Any) -> bool:
    return isinstance(data, list)


def _files(data: Any) -> bool:
    """The triton export: ``{"files": {name: text}}``."""
    files = data.get("files") if isinstance(data, dict) else None
    return isinstance(files, dict) and all(isinstance(v, str) for v in files.values())


def _unsafe_file_names(files: dict[str, str]) -> list[str]:
    """The names a caller cannot write as ``folder / name`` without leaving ``folder`` (``../x``, ``/x``,
    NUL): the farm never sends one; another server at the address might."""
    return [name for name in files if not is_plain_file_name(name)]


def _page(data: Any) -> bool:
    """A page of a list: ``{"items": [...], "total": n}``."""
    return isinstance(data, dict) and isinstance(data.get("items"), list) and isinstance(data.get("total"), int)


class Client:
    def __init__(self, base_url: str, token: str | None, timeout: float = 30.0, unreachable_hint: str = "") -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)
        self.unreachable_hint = unreachable_hint  # appended to "cannot reach the API" (e.g. run `kernelfarm up`)

    def _call(self, method: str, path: str, shape: Callable[[Any], bool], **kwargs: Any) -> Any:
        """The JSON a kernelfarm API answers, of the ``shape`` it checks (_object, _array, _page).

        Raises:
            ApiError: unreachable (status 0), a request that cannot be built (status 0), an error
                status (its ``detail``), or an answer that is not the JSON a kernelfarm API sends
                (another server at that address: a web page, a proxy's error).
        """
        response = self._send(method, path, **kwargs)
        data = _json_of(response)
        if data is _NOT_JSON or not shape(data):
            raise ApiError(response.status_code, self._not_kernelfarm(response))
        return data

    def _text(self, path: str, media_type: str, **kwargs: Any) -> str:
        """The body of a GET answered with ``media_type`` (an export's text); raises as ``_call``."""
        response = self._send("GET", path, **kwargs)
        unreadable = media_type == "application/json" and _json_of(response) is _NOT_JSON
        if _media_type(response) != media_type or unreadable:
            raise ApiError(response.status_code, self._not_kernelfarm(response))
        return response.text

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """A response of status < 400; raises ApiError as ``_call`` says."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(0, f"cannot reach the API at {self.http.base_url}{self.unreachable_hint}: {exc}") from None
        except ValueError as exc:  # nothing was sent: a body or parameter the request cannot carry (NaN, non-UTF-8)
            raise ApiError(0, f"cannot send this request: {exc}") from None
        if response.status_code < 400:
            return response
        data = _json_of(response)
        if isinstance(data, dict) and "detail" in data:
            raise ApiError(response.status_code, data["detail"])
        if response.status_code >= 500 and _media_type(response) == "text/plain" and response.text.strip():
            first_line = response.text.strip().splitlines()[0][:200]  # "Internal Server Error"
            raise ApiError(response.status_code, f"the server at {self.http.base_url} failed: {first_line}")
        raise ApiError(response.status_code, self._not_kernelfarm(response))

    def _not_kernelfarm(self, response: httpx.Response) -> str:
        return (
            f"the server at {self.http.base_url} did not answer as a kernelfarm API "
            f"(HTTP {response.status_code}, {_media_type(response) or 'no content type'})"
        )

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/jobs", _object, json=body)

    def job(self, job_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/jobs/{segment(job_id, 'job', 'id')}", _object)

    def jobs(self, **filters: Any) -> dict[str, Any]:
        params = {k: v for k, v in filters.items() if v is not None}
        return self._call("GET", "/v1/jobs", _page, params=params)

    def trials(self, job_id: str, **params: Any) -> dict[str, Any]:
        return self._call("GET", f"/v1/jobs/{segment(job_id, 'job', 'id')}/trials", _page, params=params)

    def all_trials(self, job_id: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            page = self.trials(job_id, limit=1000, offset=len(items))
            items += page["items"]
            if len(items) >= page["total"] or not page["items"]:
                return items

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/jobs/{segment(job_id, 'job', 'id')}/cancel", _object)

    def best(self, kernel: str, gpu: str, problem: dict[str, Any], objective: str = "time") -> dict[str, Any]:
        params: list[tuple[str, str]] = [("kernel", kernel), ("gpu", gpu), ("objective", objective)]
        params += [("problem", f"{k}={v}") for k, v in problem.items()]
        return self._call("GET", "/v1/best", _object, params=params)

    def export(self, kernel: str, format: str, gpu: list[str], problem: dict[str, Any]) -> str | dict[str, str]:
        """A kernel's best configs (GET /v1/best/export): the text of json and header, the files
        (name → text) of triton.

        Raises:
            ApiError: as ``_call``; also a triton answer with a name that is not a plain file name
                (``../x``, ``/x``, NUL), which the caller would write outside its folder.
        """
        params = [("kernel", kernel), ("format", format), *(("gpu", g) for g in gpu)]
        params += [("problem", f"{k}={v}") for k, v in problem.items()]
        if format == "triton":
            files: dict[str, str] = self._call("GET", "/v1/best/export", _files, params=params)["files"]
            unsafe = _unsafe_file_names(files)
            if unsafe:
                raise ApiError(
                    200,
                    f"the server at {self.http.base_url} sent the triton export's files under names that are not "
                    f"plain file names: {', '.join(map(repr, unsafe))}; nothing was written",
                )
            return files
        return self._text("/v1/best/export", EXPORT_MEDIA_TYPES.get(format, "application/json"), params=params)

    def export_trials(self, job_id: str, format: str) -> str:
        """A job's trials as text (GET /v1/jobs/{id}/export): kernel_tuner, t4 or csv."""
        path = f"/v1/jobs/{segment(job_id, 'job', 'id')}/export"
        return self._text(path, EXPORT_MEDIA_TYPES.get(format, "application/json"), params={"format": format})

    def workers(self, include_all: bool = False) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/workers", _array, params={"all": include_all})

    def gpu_models(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/gpu-models", _array)

    def kernels(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/kernels", _array)

    def kernel(self, name: str, version: int | None = None) -> dict[str, Any]:
        params = {"version": version} if version is not None else {}
        return self._call("GET", f"/v1/kernels/{segment(name, 'kernel')}", _object, params=params)

    def kernel_versions(self, name: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/v1/kernels/{segment(name, 'kernel')}/versions", _array)

    def upload_kernel(self, manifest: tuple[str, bytes], files: list[tuple[str, bytes]]) -> dict[str, Any]:
        """POST /v1/kernels: the manifest (file name, bytes) and the files it names."""
        parts = [("manifest", manifest), *(("files", item) for item in files)]
        return self._call("POST", "/v1/kernels", _object, files=parts)

    def store_profile(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/profiles", _object, json=body)

    def profiles(self, gpu_model: str | None = None) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/profiles", _array, params={"gpu_model": gpu_model} if gpu_model else {})

    def profile(self, profile_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/profiles/{segment(profile_id, 'profile', 'id')}", _object)

    def delete_profile(self, profile_id: str) -> dict[str, Any]:
        """DELETE /v1/profiles/{id}: the owner's token or an admin's; answers the deleted profile's summary."""
        return self._call("DELETE", f"/v1/profiles/{segment(profile_id, 'profile', 'id')}", _object)
