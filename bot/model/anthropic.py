"""The Anthropic Messages API behind the `Model` protocol.

One retry policy owns every retry: the SDK's own retries are off, and tenacity
retries rate limits (429), overload (529), other 5xx and lost connections,
waiting as long as the API's `retry-after-ms` / `retry-after` headers ask
(https://docs.anthropic.com/en/api/rate-limits), else backing off exponentially
with jitter. Every request carries prompt-cache breakpoints on the tool schemas,
the system prompt and the conversation tail
(https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching).

Answers stream (https://docs.anthropic.com/en/api/messages-streaming): the
client's read timeout applies to each chunk, never to the whole answer, so a
long answer cannot time out while it is being written, and `on_stream` hears
how far it has got. A failure before the answer completes (a dropped stream,
an `error` event such as an overload) retries the whole request, under the
same policy.
"""

from __future__ import annotations

import email.utils
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import anthropic
import httpx2
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from bot.config import ModelSettings
from bot.core.errors import ConfigError, DecodeError
from bot.model.info import ModelInfo, built_in, from_models_api
from bot.model.protocol import PromptTooLong, Reply, StreamProgress, Usage

DEFAULT_BASE_URL = "https://api.anthropic.com"
KEPT_BLOCKS = ("text", "tool_use", "thinking", "redacted_thinking")  # what a turn passes back to the API
MID_STREAM_RETRYABLE = ("overloaded_error", "api_error", "rate_limit_error")  # `error` events after a 200
EPHEMERAL = {"type": "ephemeral"}

log = logging.getLogger(__name__)
_INFO: dict[tuple[str, str], ModelInfo] = {}  # (base URL, model id) -> what the Models API said, once per process
_INFO_LOCK = threading.Lock()


class AnthropicModel:
    """Calls the Messages API with prompt caching and one bounded retry policy."""

    def __init__(
        self,
        model: ModelSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        max_attempts: int = 6,
        max_wait_s: float = 60.0,
        timeout_s: float = 600.0,
        progress_every_s: float = 5.0,
    ) -> None:
        """`sleep` waits between attempts (tests pass a recorder); waits never exceed `max_wait_s`; `timeout_s`
        is the longest wait for one chunk of an answer; `on_stream` hears of an answer every `progress_every_s`."""
        if not model.api_key:
            raise ConfigError(
                "ANTHROPIC_API_KEY is not set: set it to an Anthropic API key "
                "(or DECODE_MODEL=scripted:FILE to replay a recorded session)"
            )
        self.name = model.name
        self.base_url = model.base_url or DEFAULT_BASE_URL
        self.max_attempts = max_attempts
        self.max_wait_s = max_wait_s
        self.progress_every_s = progress_every_s
        self._secret = model.api_key
        self._sleep = sleep
        self._backoff = wait_exponential_jitter(initial=1, max=max_wait_s, jitter=1)
        # base_url is always passed, so the SDK never falls back to reading the environment.
        self._client = anthropic.Anthropic(
            api_key=model.api_key,
            base_url=self.base_url,
            max_retries=0,
            timeout=httpx2.Timeout(timeout_s, connect=10.0),
        )

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int,
        thinking: dict[str, Any] | None = None, on_stream: StreamProgress | None = None,
    ) -> Reply:
        """One streamed Messages API call, retried whole on transient failures; a final failure is a
        `DecodeError`. `thinking` is the request's `thinking` parameter (None: off)."""
        params = cached_request(system, messages, tools)
        if thinking is not None:
            params["thinking"] = thinking
        attempts = 0

        def call() -> Any:
            nonlocal attempts
            attempts += 1
            return self._stream(max_tokens, params, on_stream)

        try:
            message, request_id = self._retrying()(call)
        except anthropic.APIError as e:
            # Not chained: the SDK's own message quotes the response body unredacted.
            error = PromptTooLong if too_long(e) else DecodeError
            raise error(self._redact(self._describe(e, attempts)), status=_status(e)) from None
        return to_reply(message, request_id)

    def _stream(self, max_tokens: int, params: dict[str, Any], on_stream: StreamProgress | None
                ) -> tuple[Any, str | None]:
        """The answer to one request and its request id, read as Server-Sent Events to its end; a stream that
        breaks off is an `APIConnectionError` (or `APITimeoutError`), as a request that never got an answer is."""
        watch = _Watch(on_stream, self.progress_every_s)
        try:
            with self._client.messages.stream(model=self.name, max_tokens=max_tokens, **params) as stream:
                for event in stream:
                    watch.see(event)
                return stream.get_final_message(), stream.request_id
        except httpx2.TimeoutException as e:
            raise anthropic.APITimeoutError(request=httpx2.Request("POST", self.base_url)) from e
        except httpx2.TransportError as e:
            raise anthropic.APIConnectionError(message=f"the answer broke off ({type(e).__name__}: {e})",
                                               request=httpx2.Request("POST", self.base_url)) from e

    def info(self) -> ModelInfo:
        """The Models API's figures for this model, asked once per process; the built-in family figures where
        the endpoint has no Models API or the lookup fails (logged: the run goes on with them)."""
        key = (self.base_url, self.name)
        with _INFO_LOCK:
            if key in _INFO:
                return _INFO[key]
        try:
            answer = self._retrying()(lambda: self._client.models.retrieve(self.name))
        except anthropic.APIError as e:
            log.warning("the Models API did not describe %s (%s): using the built-in figures of its family",
                        self.name, self._redact(_summary(e, self._redact)))
            return built_in(self.name)
        info = from_models_api(answer.model_dump(mode="json"))
        with _INFO_LOCK:
            _INFO[key] = info
        return info

    def check(self) -> None:
        """Preflight: one token count (no tokens generated, https://docs.anthropic.com/en/api/messages-count-tokens)
        proves the key works and the model id is one it may use; a `DecodeError` that says what to fix if not."""
        attempts = 0
        ping = [{"role": "user", "content": "ping"}]

        def call() -> Any:
            nonlocal attempts
            attempts += 1
            try:
                return self._client.messages.count_tokens(model=self.name, messages=ping)
            except anthropic.NotFoundError as e:
                if (e.api_message or "").lower().startswith("model"):
                    raise
            # An Anthropic-compatible endpoint without token counting: a one-token message instead.
            return self._client.messages.create(model=self.name, max_tokens=1, messages=ping)

        try:
            self._retrying()(call)
        except anthropic.APIStatusError as e:
            detail = self._redact(_summary(e).split(": ", 1)[-1])
            what = f"{e.status_code} {e.type or 'error'}"
            if e.status_code == 401:
                message = f"ANTHROPIC_API_KEY was rejected ({what}): set a valid key"
            elif e.status_code == 403:
                message = f"ANTHROPIC_API_KEY may not use the Messages API ({what}: {detail}): check the key's permissions"
            elif e.status_code == 404 or detail.lower().startswith("model"):
                message = f"DECODE_MODEL={self.name} is not a model this key can use: {detail}"
            else:
                message = self._redact(self._describe(e, attempts))
            raise DecodeError(message, status=e.status_code) from None
        except anthropic.APIError as e:
            raise DecodeError(self._redact(self._describe(e, attempts)), status=_status(e)) from None

    def _retrying(self) -> Retrying:
        return Retrying(
            sleep=self._sleep,
            stop=stop_after_attempt(self.max_attempts),
            wait=self._wait,
            retry=retry_if_exception(is_retryable),
            before_sleep=self._log_retry,
            reraise=True,
        )

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, anthropic.APIStatusError):
            asked = retry_after(error.response.headers)
            if asked is not None:
                return min(asked, self.max_wait_s)
        return self._backoff(state)

    def _log_retry(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "the Anthropic API %s; retrying in %.1fs (attempt %d of %d)",
            self._redact(_summary(error, self._redact)), wait, state.attempt_number + 1, self.max_attempts,
        )

    def _describe(self, error: anthropic.APIError, attempts: int) -> str:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        if isinstance(error, anthropic.APIStatusError):
            hint = ": check ANTHROPIC_API_KEY" if error.status_code in (401, 403) else ""
            request = f" (request {error.request_id})" if error.request_id else ""
            return f"the Anthropic API at {self.base_url} {_summary(error, self._redact)}{tries}{request}{hint}"
        if isinstance(error, anthropic.APIConnectionError):
            return (
                f"cannot reach the Anthropic API at {self.base_url}{tries}: {_summary(error, self._redact)}: "
                "check ANTHROPIC_BASE_URL and the network"
            )
        return f"the Anthropic API at {self.base_url} gave an unusable answer: {error.message}"

    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "[redacted]") if self._secret else text


class _Watch:
    """Follows a streamed answer and tells `on_stream` what it is writing (`thinking` or `writing`) and about how
    many tokens so far (4 characters a token), at most once every `every_s` seconds, the first after `every_s`:
    a short answer says nothing."""

    def __init__(self, on_stream: StreamProgress | None, every_s: float) -> None:
        self.on_stream, self.every_s = on_stream, every_s
        self.told = time.monotonic()
        self.chars = 0

    def see(self, event: Any) -> None:
        if self.on_stream is None or event.type != "content_block_delta":
            return
        delta = event.delta
        phase = "thinking" if delta.type == "thinking_delta" else "writing"
        self.chars += len(getattr(delta, "thinking", None) or getattr(delta, "text", None)
                          or getattr(delta, "partial_json", None) or "")
        if time.monotonic() - self.told >= self.every_s:
            self.told = time.monotonic()
            self.on_stream(phase, self.chars // 4)


def is_retryable(error: BaseException) -> bool:
    """429, 529 and other 5xx answers, an overload or server error in the middle of a streamed answer, and lost
    connections or timeouts; never another 4xx."""
    if isinstance(error, anthropic.APIStatusError):
        if error.status_code < 400:
            return error.type in MID_STREAM_RETRYABLE
        return error.status_code == 429 or error.status_code >= 500
    return isinstance(error, anthropic.APIConnectionError)


def too_long(error: anthropic.APIError) -> bool:
    """The API's answer to a prompt over the model's window: 400 "prompt is too long: N tokens > M maximum"."""
    return (isinstance(error, anthropic.BadRequestError)
            and "prompt is too long" in str(error.api_message or error.message).lower())


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asks us to wait: `retry-after-ms`, else `retry-after` (seconds or HTTP date)."""
    try:
        return max(0.0, float(headers["retry-after-ms"]) / 1000)
    except (KeyError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def cached_request(system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Request parameters with cache breakpoints on the last tool, the system prompt and the last block.

    The caller's lists are left alone. Older `cache_control` marks in them are
    dropped, so a request never carries more than the API's 4 breakpoints.
    """
    params: dict[str, Any] = {"messages": [_unmarked_message(m) for m in messages]}
    if tools:
        params["tools"] = [_unmarked(t) for t in tools[:-1]] + [{**tools[-1], "cache_control": dict(EPHEMERAL)}]
    if system:
        params["system"] = [{"type": "text", "text": system, "cache_control": dict(EPHEMERAL)}]
    if params["messages"]:
        last = params["messages"][-1]
        content = last["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        if blocks:
            blocks[-1] = {**blocks[-1], "cache_control": dict(EPHEMERAL)}
            params["messages"][-1] = {**last, "content": blocks}
    return params


def to_reply(message: Any, request_id: str | None) -> Reply:
    """The SDK's `Message` as a `Reply` of plain dicts: text, tool_use, and thinking blocks with their signatures
    (and redacted_thinking with its data) exactly as received, since a tool-use turn must send them back."""
    content = [
        _plain(block.model_dump(mode="json", exclude_none=True))
        for block in message.content
        if block.type in KEPT_BLOCKS
    ]
    usage = Usage(
        input_tokens=message.usage.input_tokens,
        output_tokens=message.usage.output_tokens,
        cache_read_tokens=message.usage.cache_read_input_tokens or 0,
        cache_creation_tokens=message.usage.cache_creation_input_tokens or 0,
    )
    return Reply(
        content=content,
        stop_reason=message.stop_reason or "end_turn",
        usage=usage,
        model=message.model,
        request_id=request_id,
    )


def _plain(block: dict[str, Any]) -> dict[str, Any]:
    """A block as the API defines it: the streaming helper's own additions (a text's `parsed_output`) left out."""
    return {k: v for k, v in block.items() if k != "parsed_output"}


def _unmarked(block: dict[str, Any]) -> dict[str, Any]:
    if "cache_control" not in block:
        return block
    return {k: v for k, v in block.items() if k != "cache_control"}


def _unmarked_message(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list) and any(isinstance(b, dict) and "cache_control" in b for b in content):
        return {**message, "content": [_unmarked(b) if isinstance(b, dict) else b for b in content]}
    return message


def _summary(error: BaseException | None, redact: Callable[[str], str] = lambda text: text) -> str:
    """One line about `error`; the API's own detail is redacted whole before it is shortened."""
    if isinstance(error, anthropic.APIStatusError):
        detail = error.api_message or (error.body if isinstance(error.body, str) else None) or error.message
        if error.status_code < 400:
            return f"failed mid-answer with {error.type or 'an error'}: {redact(str(detail))[:300]}"
        return f"answered {error.status_code} {error.type or 'error'}: {redact(str(detail))[:300]}"
    if isinstance(error, anthropic.APITimeoutError):
        return "the request timed out"
    if isinstance(error, anthropic.APIConnectionError):
        cause = error.__cause__
        return f"connection failed ({cause or error.message})"
    return str(error)


def _status(error: anthropic.APIError) -> int | None:
    return error.status_code if isinstance(error, anthropic.APIStatusError) else None
