import pytest


@pytest.fixture(autouse=True)
def immediate_tasks(settings):
    """Queued tasks run at once in the test process (the real worker is tested on its own)."""
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
