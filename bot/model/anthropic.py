"""The Anthropic Messages API behind the `Model` protocol, served by Anthropic, Bedrock or Vertex AI.

The provider (`providers.py`) only builds the SDK client and names its credentials in errors; the request,
the retries and the reply are the same for all three.

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
an `error` event such as an overload, Bedrock's exception messages such as
`serviceUnavailableException`) retries the whole request, under the same policy.

A request with `context_management` (where the Models API lists the strategy for the model, bot/agent/context.py
decides) goes to the beta Messages API with the `context-management-2025-06-27` header
(https://docs.anthropic.com/en/docs/build-with-claude/context-editing): the API clears old tool results from
the prompt before the model reads it, and the reply's `context_edits` are its `applied_edits`.
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
from bot.model.providers import connect, reason

KEPT_BLOCKS = ("text", "tool_use", "thinking", "redacted_thinking")  # what a turn passes back to the API
# A stream's failure after its 200: the API's `error` event types, and Bedrock's exception messages (the SDK makes
# each an error of that type).
MID_STREAM_RETRYABLE = ("overloaded_error", "api_error", "rate_limit_error", "serviceUnavailableException",
                        "throttlingException", "internalServerException", "modelStreamErrorException")
EPHEMERAL = {"type": "ephemeral"}
CONTEXT_BETA = "context-management-2025-06-27"  # the beta header of `context_management`

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
        self.name = model.name
        self.max_attempts = max_attempts
        self.max_wait_s = max_wait_s
        self.provider = connect(model, httpx2.Timeout(timeout_s, connect=10.0))
        self.base_url = self.provider.base_url
        self._secrets = [s for s in (model.api_key, model.aws_secret_access_key, model.aws_session_token,
                                     model.aws_bearer_token) if s]
        self._client = self.provider.client
        self.progress_every_s = progress_every_s
        self._sleep = sleep
        self._backoff = wait_exponential_jitter(initial=1, max=max_wait_s, jitter=1)

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int,
        thinking: dict[str, Any] | None = None, on_stream: StreamProgress | None = None,
        context_management: dict[str, Any] | None = None,
    ) -> Reply:
        """One streamed Messages API call, retried whole on transient failures; a final failure is a
        `DecodeError`. `thinking` is the request's `thinking` parameter (None: off); `context_management` the
        server-side edits to apply (None: none, the plain Messages API)."""
        params = cached_request(system, messages, tools)
        if thinking is not None:
            params["thinking"] = thinking
        if context_management is not None:
            params["context_management"] = context_management
        message, request_id = self._call(lambda: self._stream(max_tokens, params, on_stream))
        return to_reply(message, request_id)

    def _stream(self, max_tokens: int, params: dict[str, Any], on_stream: StreamProgress | None
                ) -> tuple[Any, str | None]:
        """The answer to one request and its request id, read as Server-Sent Events to its end; a stream that
        breaks off is an `APIConnectionError` (or `APITimeoutError`), as a request that never got an answer is."""
        watch = _Watch(on_stream, self.progress_every_s)
        api = self._client.messages
        if "context_management" in params:
            api, params = self._client.beta.messages, {**params, "betas": [CONTEXT_BETA]}
        try:
            with api.stream(model=self.name, max_tokens=max_tokens, **params) as stream:
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
        the endpoint has no Models API or the lookup fails (logged: the run goes on with them). Bedrock and
        Vertex AI have no Models API: their figures are the built-in ones, without a request."""
        if not self.provider.models_api:
            return built_in(self.name)
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
        proves the credentials work and the model id is one they may use; where the provider or endpoint has no
        token counting (Bedrock), a one-token message instead. A `DecodeError` that says what to fix if not:
        rejected credentials are a `ConfigError` naming the provider's variables."""
        ping = [{"role": "user", "content": "ping"}]

        def call() -> Any:
            if self.provider.counts_tokens:
                try:
                    return self._client.messages.count_tokens(model=self.name, messages=ping)
                except anthropic.NotFoundError as e:
                    if (e.api_message or "").lower().startswith("model"):
                        raise
            # An endpoint without token counting: a one-token message instead.
            return self._client.messages.create(model=self.name, max_tokens=1, messages=ping)

        try:
            self._call(call, raw=True)
        except anthropic.APIStatusError as e:
            raise self._refusal(e) from None

    def _call(self, request: Callable[[], Any], *, raw: bool = False) -> Any:
        """`request` under the retry policy. A final failure is a `DecodeError` (`PromptTooLong` for a prompt over
        the window; with `raw`, an API status error is left to the caller); a credential lookup that fails
        (boto3, google-auth) is a `ConfigError`."""
        attempts = 0

        def call() -> Any:
            nonlocal attempts
            attempts += 1
            return request()

        try:
            return self._retrying()(call)
        except anthropic.APIError as e:
            if raw and isinstance(e, anthropic.APIStatusError):
                raise
            # Not chained: the SDK's own message quotes the response body unredacted.
            error = PromptTooLong if too_long(e) else DecodeError
            raise error(self._redact(self._describe(e, attempts)), status=_status(e)) from None
        except self.provider.auth_errors as e:
            raise ConfigError(self._redact(f"{self.provider.api}: the credentials could not be obtained "
                                           f"({reason(e)}): check {self.provider.credentials}")) from None

    def _refusal(self, e: anthropic.APIStatusError) -> DecodeError:
        """What the preflight says when the provider refuses: the credentials, the model id, or the answer."""
        detail = self._redact(_summary(e).split(": ", 1)[-1])
        what = f"{e.status_code} {e.type or 'error'}"
        anthropic_api = self.provider.name == "anthropic"
        if e.status_code == 401 and anthropic_api:
            return ConfigError(f"ANTHROPIC_API_KEY was rejected ({what}): set a valid key", status=401)
        if e.status_code == 403 and anthropic_api:
            return ConfigError(f"ANTHROPIC_API_KEY may not use the Messages API ({what}: {detail}): check the key's "
                               "permissions", status=403)
        if e.status_code in (401, 403):
            return ConfigError(f"{self.provider.api} refused the credentials ({what}: {detail}): check "
                               f"{self.provider.credentials}", status=e.status_code)
        if e.status_code == 404 or detail.lower().startswith("model") or "model identifier" in detail.lower():
            whose = "this key can use" if anthropic_api else f"these credentials can use on {self.provider.api}"
            return DecodeError(f"DECODE_MODEL={self.name} is not a model {whose}: {detail}", status=e.status_code)
        return DecodeError(self._redact(self._describe(e, 1)), status=e.status_code)

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
            "%s %s; retrying in %.1fs (attempt %d of %d)", self.provider.api,
            self._redact(_summary(error, self._redact)), wait, state.attempt_number + 1, self.max_attempts,
        )

    def _describe(self, error: anthropic.APIError, attempts: int) -> str:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        api = f"{self.provider.api} at {self.base_url}"
        if isinstance(error, anthropic.APIStatusError):
            hint = f": check {self.provider.credentials}" if error.status_code in (401, 403) else ""
            request = f" (request {error.request_id})" if error.request_id else ""
            return f"{api} {_summary(error, self._redact)}{tries}{request}{hint}"
        if isinstance(error, anthropic.APIConnectionError):
            return (f"cannot reach {api}{tries}: {_summary(error, self._redact)}: "
                    f"check {self.provider.base_url_var} and the network")
        return f"{api} gave an unusable answer: {error.message}"

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text


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
    """The SDK's `Message` (or `BetaMessage`) as a `Reply` of plain dicts: text, tool_use, and thinking blocks with
    their signatures (and redacted_thinking with its data) exactly as received, since a tool-use turn must send
    them back; the context edits the API applied, if any."""
    content = [
        _plain(block.model_dump(mode="json", exclude_none=True))
        for block in message.content
        if block.type in KEPT_BLOCKS
    ]
    managed = getattr(message, "context_management", None)
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
        context_edits=[edit.model_dump(mode="json") for edit in managed.applied_edits] if managed else [],
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
        # Anthropic's and Google's errors nest the message under "error"; Bedrock's is a top-level "message".
        body = error.body if isinstance(error.body, dict) else {}
        detail = (error.api_message or body.get("message") or (error.body if isinstance(error.body, str) else None)
                  or error.message)
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
