"""Model providers: `offline` (default, no network), `openai:<model>`, `anthropic:<model>`."""

from django.conf import settings

from sessions_app.runtime.providers.base import ModelReply, Provider, ProviderError, ToolSpec

__all__ = [
    "ModelReply",
    "Provider",
    "ProviderError",
    "ToolSpec",
    "check_model_spec",
    "provider_for",
]

MODEL_SPEC_HELP = "offline, openai:<model> or anthropic:<model>"


def check_model_spec(spec: object) -> str:
    """`spec` if it names a model a turn can use, else ValueError saying what would."""
    if isinstance(spec, str) and len(spec) <= 200:
        kind, _, model = spec.partition(":")
        if spec == "offline" or (
            kind in {"openai", "anthropic"} and model and not any(c.isspace() for c in model)
        ):
            return spec
    raise ValueError(f"unknown model {spec!r:.80}: use {MODEL_SPEC_HELP}")


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
