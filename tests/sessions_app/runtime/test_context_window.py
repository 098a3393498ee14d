"""How much a model takes and how much a request takes (docs/design.md §22), with no network:
tiktoken's encoding ships with the project's requirements."""

from sessions_app.runtime.context.context_window import (
    DEFAULT_OUTPUT_TOKENS,
    budget_for,
    correction_observe,
    model_limits,
    request_tokens,
    text_tokens,
)


def test_windows_come_from_the_table_its_families_the_setting_or_the_default(settings):
    assert model_limits("openai:gpt-4o").window == 128_000
    assert model_limits("openai:gpt-4o-2024-08-06") == model_limits("gpt-4o")
    assert model_limits("anthropic:claude-sonnet-4-5").window == 200_000
    settings.MODEL_LIMITS = {"my-model": {"window": 32_000, "output": 4_000}}
    assert (model_limits("openai:my-model").window, model_limits("my-model").output) == (
        32_000,
        4_000,
    )
    settings.DEFAULT_CONTEXT_WINDOW = 64_000
    unknown = model_limits("anthropic:someone-elses-model")
    assert (unknown.window, unknown.output) == (64_000, DEFAULT_OUTPUT_TOKENS)


def test_the_reserve_is_the_output_limit_capped_or_the_setting(settings):
    assert budget_for("openai:gpt-4o").reserve == 16_384
    assert budget_for("anthropic:claude-sonnet-4-5").reserve == 16_384  # 64k output, capped
    settings.MODEL_LIMITS = {"tiny": {"window": 8_000, "output": 6_000}}
    assert budget_for("tiny").reserve == 4_000  # never more than half the window
    settings.CONTEXT_RESERVE_TOKENS = 1_000
    assert budget_for("openai:gpt-4o").available == 127_000


def test_openai_models_are_counted_exactly_and_others_estimated():
    assert text_tokens("openai:gpt-4o", "hello world") == 2
    assert text_tokens("openai:gpt-4o", "<|endoftext|>") > 1  # special tokens count as text
    assert text_tokens("anthropic:claude-haiku-4-5", "x" * 400) == 100


def test_a_reported_count_above_the_estimate_raises_later_estimates_never_lowers_them():
    label = "anthropic:correction-test-model"
    body = {"system": "s", "messages": [{"role": "user", "content": "x" * 4000}]}
    counted = request_tokens(label, body)
    correction_observe(label, counted=counted, reported=counted // 10)
    assert request_tokens(label, body) == counted
    correction_observe(label, counted=counted, reported=counted * 3 // 2)
    assert request_tokens(label, body) == int(counted * 1.5)
    correction_observe(label, counted=counted, reported=counted * 10)
    assert request_tokens(label, body) == counted * 2  # at most twice
    assert request_tokens(label, body, corrected=False) == counted
