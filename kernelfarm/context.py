"""Where the CLI finds the API, the database and its token: flags, then the environment
(KERNELFARM_API_URL, KERNELFARM_API_TOKEN, DATABASE_URL), then the running embedded stack of this
user (its state dir: KERNELFARM_STATE_DIR, default per user, so any working directory finds it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelfarm.client import Client
from kernelfarm.core.settings import Settings, get_settings
from kernelfarm.sdk.client import Client as SdkClient
from kernelfarm.stack import StackState

NOT_RUNNING = "the kernelfarm stack is not running (state dir {}): run `kernelfarm up`"


class CliError(Exception):
    """A condition the user can fix, printed as one line (kernelfarm.cli turns it into exit code 1)."""


@dataclass(frozen=True)
class CliContext:
    settings: Settings
    state_dir: Path

    @property
    def stack(self) -> StackState | None:
        return StackState.load(self.state_dir.resolve())

    def database_url(self) -> str:
        if url := self.settings.checked_database_url():
            return url
        if self.stack:
            return self.stack.database_url
        raise CliError(NOT_RUNNING.format(self.state_dir) + ", or set DATABASE_URL")

    def client(self) -> Client:
        url, token = self.endpoint()
        hint = "" if "api_url" in self.settings.model_fields_set else " (is the stack running? run `kernelfarm up`)"
        return Client(url, token, unreachable_hint=hint)

    def sdk_client(self) -> SdkClient:
        """The typed client (kernelfarm.Client) of the same API."""
        return SdkClient(*self.endpoint())

    def endpoint(self) -> tuple[str, str | None]:
        """The API's URL and token."""
        # An explicitly configured API wins over the local stack's; with its token too, the stack's
        # state (a state dir that may not even be usable) is not read at all.
        explicit = "api_url" in self.settings.model_fields_set
        if explicit and self.settings.api_token:
            return self.settings.api_url, self.settings.api_token
        stack = self.stack
        if not explicit and stack is None:
            raise CliError(NOT_RUNNING.format(self.state_dir) + ", or set KERNELFARM_API_URL")
        url = self.settings.api_url if explicit or stack is None else stack.api_url
        token = self.settings.api_token or (stack.token if stack else None)
        return url, token


def cli_context(state_dir: Path | None = None) -> CliContext:
    settings = get_settings()
    return CliContext(settings=settings, state_dir=state_dir or settings.state_dir)
