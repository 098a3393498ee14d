"""Model providers: `offline` (default, no network), `openai:<model>`, `anthropic:<model>`."""

from django.conf import settings

from sessions_app.runtime.providers.base import ModelReply, Provider, ProviderError, ToolSpec

__all__ = ["ModelReply", "Provider", "ProviderError", "ToolSpec", "provider_for"]


def provider_for(spec: str | None = None) -> Provider:
    """The provider named by `spec` (default: settings.JARVIS_MODEL)."""
    spec = spec or settings.JARVIS_MODEL
    if spec == "offline":
        from sessions_app.runtime.providers.offline import OfflineProvider

        return OfflineProvider()
    kind, _, model = spec.partition(":")
    if kind == "openai" and model:
        from sessions_app.runtime.providers.openai import OpenAIProvider

        return OpenAIProvider(
            model,
            api_key=settings.OPENAI_API_KEY,
            base_url=settings.OPENAI_BASE_URL or None,
        )
    if kind == "anthropic" and model:
        from sessions_app.runtime.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            model,
            api_key=settings.ANTHROPIC_API_KEY,
            base_url=settings.ANTHROPIC_BASE_URL or None,
        )
    raise ValueError(f"unknown model {spec!r}: use offline, openai:<model> or anthropic:<model>")
