"""Model providers: `offline` (default, no network), `openai:<model>`, `anthropic:<model>`."""

import logging
from collections.abc import Iterable
from functools import lru_cache

from django.conf import settings

from jarvis_site.shared.errors import Code, DomainError
from sessions_app.runtime.providers.base import ModelReply, Provider, ProviderError, ToolSpec
from sessions_app.runtime.providers.offline import OfflineProvider

__all__ = [
    "BadModel",
    "ModelReply",
    "Provider",
    "ProviderError",
    "ToolSpec",
    "check_model_spec",
    "provider_for",
    "providers_preload",
]

logger = logging.getLogger(__name__)

MODEL_SPEC_HELP = "offline, openai:<model> or anthropic:<model>"


class BadModel(DomainError, ValueError):
    """Not a model a turn can use: the same answer through /model and PATCH."""

    code = Code.BAD_MODEL


def check_model_spec(spec: object) -> str:
    """`spec` if it names a model a turn can use, else BadModel saying what would."""
    if isinstance(spec, str) and len(spec) <= 200:
        kind, _, model = spec.partition(":")
        if spec == "offline" or (
            kind in {"openai", "anthropic"} and model and not any(c.isspace() for c in model)
        ):
            return spec
    raise BadModel(f"unknown model {spec!r:.80}: use {MODEL_SPEC_HELP}")


def provider_for(spec: str | None = None) -> Provider:
    """The provider named by `spec` (default: settings.JARVIS_MODEL).

    One provider per model and credentials in a process: an SDK client costs tens of
    milliseconds to build (its TLS context loads the certificate bundle), which a turn per
    client paid in full — at hundreds of turns at once, seconds of a worker's time.
    """
    spec = spec or settings.JARVIS_MODEL
    kind, _, model = spec.partition(":")
    if kind == "openai" and model:
        return _provider(spec, settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL or None)
    if kind == "anthropic" and model:
        return _provider(spec, settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL or None)
    return _provider(spec, "", None)


def providers_preload(specs: Iterable[str] = ()) -> None:
    """Prepare JARVIS_MODEL and every model of `specs` now, in a server that is starting.

    Importing an SDK costs about a second of CPU. Left to the first turn, it runs on the
    worker's event loop while every other socket of the process waits; so does building the
    first async client, and a storm of a model's first requests each asked the platform in
    a thread (SdkProvider.preload). Every model the deployment names is prepared the same
    way, so a session's own model is as fast as the default (docs/design.md §26).
    """
    _preload(settings.JARVIS_MODEL)
    for spec in dict.fromkeys(specs):
        if spec == settings.JARVIS_MODEL:
            continue
        try:
            _preload(spec)
        except Exception:
            # The server still starts: a turn of that model fails with the provider's own
            # words (a missing key), as it would have unprepared.
            logger.warning("could not prepare the model %s", spec, exc_info=True)


def _preload(spec: str) -> None:
    preload = getattr(provider_for(spec), "preload", None)
    if preload is not None:
        preload()


@lru_cache(maxsize=64)
def _provider(spec: str, api_key: str, base_url: str | None) -> Provider:
    if spec == "offline":
        return OfflineProvider()
    kind, _, model = spec.partition(":")
    if kind == "openai" and model:
        # An optional SDK loaded on first use: a server that never asks OpenAI never pays
        # for importing its SDK.
        from sessions_app.runtime.providers.openai import OpenAIProvider

        return OpenAIProvider(model, api_key=api_key, base_url=base_url)
    if kind == "anthropic" and model:
        # An optional SDK loaded on first use, as OpenAI's above.
        from sessions_app.runtime.providers.anthropic import AnthropicProvider

        return AnthropicProvider(model, api_key=api_key, base_url=base_url)
    raise ValueError(f"unknown model {spec!r}: use offline, openai:<model> or anthropic:<model>")
