"""A small typed client of the REST API (used by the CLI and by tests)."""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError

from kernelfarm import answers
from kernelfarm.core.errors import KernelfarmError
from kernelfarm.core.exports import is_plain_file_name, json_format
from kernelfarm.core.exports.model import BestExport
from kernelfarm.core.printable import one_line, validation_reasons

# The most of a detail's list (FastAPI's validation errors) one line quotes, and how deep a detail's
# nesting is followed: any JSON may come back from a server that is not the farm.
DETAIL_ITEMS = 10
DETAIL_DEPTH = 8
NO_REASON = "no reason given"
TOKEN_PROBLEM = "token must be printable ASCII text (from `kernelfarm token create`)"


def human_detail(detail: Any, depth: int = 0) -> str:
    """An error body's ``detail`` as one line: FastAPI's list of validation errors becomes
    "field: message; field: message" (the location without its "body"/"query" prefix). Any other JSON
    (a number, null, a ``loc`` that is no list) is shown as it is, never raises."""
    if _empty(detail):
        return NO_REASON
    if isinstance(detail, str):
        return one_line(detail)
    if depth >= DETAIL_DEPTH:
        return one_line(reprlib.repr(detail))  # cut short, however deep it goes
    if isinstance(detail, dict):
        for key in ("message", "detail", "reason"):
            if key in detail:
                return human_detail(detail[key], depth + 1)
        if "errors" in detail:
            return human_detail(detail["errors"], depth + 1)
        if "msg" in detail:  # one of FastAPI's validation errors
            return _issue(detail, depth)
    if isinstance(detail, list):
        shown = "; ".join(human_detail(item, depth + 1) for item in detail[:DETAIL_ITEMS])
        return shown + (f" (and {len(detail) - DETAIL_ITEMS} more)" if len(detail) > DETAIL_ITEMS else "")
    return one_line(str(detail))


def _empty(detail: Any) -> bool:
    """null, "" or an empty list or object: a detail that gives no reason."""
    return detail is None or (isinstance(detail, str | list | dict) and not detail)


def _issue(item: dict[str, Any], depth: int) -> str:
    """``{"loc": [...], "msg": ...}`` as "field: message"."""
    loc = item.get("loc")
    parts = loc if isinstance(loc, list | tuple) else [] if loc is None else [loc]
    location = [one_line(str(p)) for p in parts if p not in ("body", "query", "path")]
    message = human_detail(item["msg"], depth + 1)
    return f"{'.'.join(location)}: {message}" if location else message


def token_problem(token: object) -> str | None:
    """Why ``token`` cannot be sent as a bearer token, or None: an HTTP header carries printable ASCII
    only (httpx raised UnicodeEncodeError for a typographic quote, and "Illegal header value" for a
    pasted line break)."""
    if token is not None and (not isinstance(token, str) or not token.isascii() or not token.isprintable()):
        return TOKEN_PROBLEM
    return None


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
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the decoder goes
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
    """The API at ``base_url``.

    Raises:
        ApiError: (status 0, nothing sent) ``token`` is not printable ASCII, or ``base_url`` is no URL
            (a port that is not a number).
    """

    def __init__(self, base_url: str, token: str | None, timeout: float = 30.0, unreachable_hint: str = "") -> None:
        problem = token_problem(token)
        if problem:
            raise ApiError(0, f"the API token is malformed: {problem}")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            self.http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout)
        except httpx.InvalidURL as exc:
            raise ApiError(0, f"the API URL {base_url!r} is not a valid URL: {exc}") from None
        self.unreachable_hint = unreachable_hint  # appended to "cannot reach the API" (e.g. run `kernelfarm up`)

    def _call(
        self, method: str, path: str, shape: Callable[[Any], bool], reads: TypeAdapter[Any] | None = None,
        **kwargs: Any,
    ) -> Any:  # fmt: skip
        """The JSON a kernelfarm API answers, of the ``shape`` it checks (_object, _array, _page) and with
        the fields this CLI ``reads`` (kernelfarm.answers), as the server sent it.

        Raises:
            ApiError: unreachable (status 0), a request that cannot be built (status 0), an error
                status (its ``detail``), an answer that is not the JSON a kernelfarm API sends
                (another server at that address: a web page, a proxy's error), or one without the
                fields ``reads`` names (another kernelfarm version).
        """
        response = self._send(method, path, **kwargs)
        data = _json_of(response)
        if data is _NOT_JSON or not shape(data):
            raise ApiError(response.status_code, self._not_kernelfarm(response))
        if reads is not None:
            try:
                reads.validate_python(data)
            except ValidationError as exc:
                problem = answers.unreadable(exc)
                raise ApiError(response.status_code, self._other_version(method, path, problem)) from None
        return data

    def _other_version(self, method: str, path: str, problem: str) -> str:
        shown = path if len(path) <= 80 else path[:77] + "..."
        return f"the API at {self.http.base_url} answered {method} {shown} {problem}: is it another kernelfarm version?"

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
        except httpx.InvalidURL as exc:  # nothing was sent: a path or query longer than httpx builds (64 KiB)
            too_long = "an argument is too long for a URL: " if "too long" in str(exc) else ""  # httpx's words
            raise ApiError(0, f"cannot send this request: {too_long}{exc}") from None
        if response.status_code < 400:
            return response
        data = _json_of(response)
        if isinstance(data, dict) and "detail" in data:
            if _empty(data["detail"]):
                raise ApiError(response.status_code, f"the server at {self.http.base_url} answered HTTP "
                                                     f"{response.status_code} without a reason")  # fmt: skip
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
        return self._call("POST", "/v1/jobs", _object, answers.JOB, json=body)

    def job(self, job_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/jobs/{segment(job_id, 'job', 'id')}", _object, answers.JOB)

    def jobs(self, **filters: Any) -> dict[str, Any]:
        params = {k: v for k, v in filters.items() if v is not None}
        return self._call("GET", "/v1/jobs", _page, answers.JOB_PAGE, params=params)

    def trials(self, job_id: str, **params: Any) -> dict[str, Any]:
        path = f"/v1/jobs/{segment(job_id, 'job', 'id')}/trials"
        return self._call("GET", path, _page, answers.TRIAL_PAGE, params=params)

    def all_trials(self, job_id: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            page = self.trials(job_id, limit=1000, offset=len(items))
            items += page["items"]
            if len(items) >= page["total"] or not page["items"]:
                return items

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._call("POST", f"/v1/jobs/{segment(job_id, 'job', 'id')}/cancel", _object, answers.JOB)

    def best(self, kernel: str, gpu: str, problem: dict[str, Any], objective: str = "time") -> dict[str, Any]:
        params: list[tuple[str, str]] = [("kernel", kernel), ("gpu", gpu), ("objective", objective)]
        params += [("problem", f"{k}={v}") for k, v in problem.items()]
        return self._call("GET", "/v1/best", _object, answers.BEST, params=params)

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
        text = self._text("/v1/best/export", EXPORT_MEDIA_TYPES.get(format, "application/json"), params=params)
        if format == "json":
            self._check_export(text)
        return text

    def _check_export(self, text: str) -> None:
        """A json export in the farm's schema, of a version this CLI reads; else ApiError (status 200) with
        one line saying why (json_format.read's reason quotes pydantic's, many lines long)."""
        try:
            BestExport.model_validate_json(text)
            json_format.read(text)
        except ValidationError as exc:
            reason = validation_reasons(exc, "the export", answers.NAMED_FIELDS)
        except KernelfarmError as exc:  # another major version of the schema
            reason = str(exc)
        else:
            return
        problem = f"with an export this CLI cannot read ({reason})"
        raise ApiError(200, self._other_version("GET", "/v1/best/export", problem))

    def export_trials(self, job_id: str, format: str) -> str:
        """A job's trials as text (GET /v1/jobs/{id}/export): kernel_tuner, t4 or csv."""
        path = f"/v1/jobs/{segment(job_id, 'job', 'id')}/export"
        return self._text(path, EXPORT_MEDIA_TYPES.get(format, "application/json"), params={"format": format})

    def workers(self, include_all: bool = False) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/workers", _array, answers.WORKERS, params={"all": include_all})

    def gpu_models(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/gpu-models", _array)

    def kernels(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/kernels", _array, answers.KERNELS)

    def kernel(self, name: str, version: int | None = None) -> dict[str, Any]:
        params = {"version": version} if version is not None else {}
        return self._call("GET", f"/v1/kernels/{segment(name, 'kernel')}", _object, answers.KERNEL, params=params)

    def kernel_versions(self, name: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/v1/kernels/{segment(name, 'kernel')}/versions", _array, answers.KERNEL_VERSIONS)

    def upload_kernel(self, manifest: tuple[str, bytes], files: list[tuple[str, bytes]]) -> dict[str, Any]:
        """POST /v1/kernels: the manifest (file name, bytes) and the files it names."""
        parts = [("manifest", manifest), *(("files", item) for item in files)]
        return self._call("POST", "/v1/kernels", _object, answers.KERNEL_VERSION, files=parts)

    def store_profile(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/v1/profiles", _object, json=body)

    def profiles(self, gpu_model: str | None = None) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/profiles", _array, params={"gpu_model": gpu_model} if gpu_model else {})

    def profile(self, profile_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/profiles/{segment(profile_id, 'profile', 'id')}", _object)

    def delete_profile(self, profile_id: str) -> dict[str, Any]:
        """DELETE /v1/profiles/{id}: the owner's token or an admin's; answers the deleted profile's summary."""
        return self._call("DELETE", f"/v1/profiles/{segment(profile_id, 'profile', 'id')}", _object)
