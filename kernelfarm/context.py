"""Where the CLI finds the API, the database and its token: flags, then the environment
(KERNELFARM_API_URL, KERNELFARM_API_TOKEN, DATABASE_URL), then a running embedded stack."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import typer

from kernelfarm.client import Client
from kernelfarm.core.settings import Settings, get_settings
from kernelfarm.sdk.client import Client as SdkClient
from kernelfarm.stack import StackState


@dataclass(frozen=True)
class CliContext:
    settings: Settings
    state_dir: Path

    @property
    def stack(self) -> StackState | None:
        return StackState.load(self.state_dir.resolve())

    def database_url(self) -> str:
        if self.settings.database_url:
            return self.settings.database_url
        if self.stack:
            return self.stack.database_url
        raise typer.BadParameter("no database: set DATABASE_URL or start the embedded stack with `kernelfarm up`")

    def client(self) -> Client:
        return Client(*self.endpoint())

    def sdk_client(self) -> SdkClient:
        """The typed client (kernelfarm.Client) of the same API."""
        return SdkClient(*self.endpoint())

    def endpoint(self) -> tuple[str, str | None]:
        """The API's URL and token."""
        stack = self.stack
        # An explicitly configured API wins over the local stack's.
        explicit = "api_url" in self.settings.model_fields_set
        url = self.settings.api_url if explicit or stack is None else stack.api_url
        token = self.settings.api_token or (stack.token if stack else None)
        return url, token


def cli_context(state_dir: Path | None = None) -> CliContext:
    settings = get_settings()
    return CliContext(settings=settings, state_dir=state_dir or settings.state_dir)
