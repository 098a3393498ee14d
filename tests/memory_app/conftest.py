import pytest


@pytest.fixture(autouse=True)
def immediate_tasks(settings):
    """Queued tasks run at once in the test process (the real worker is tested on its own)."""
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}


@pytest.fixture(params=["db", "jsonl"])
def store_backend(request, settings):
    """Run a test on each session store backend; memory lives in the database either way."""
    from sessions_app.store import get_store

    settings.JARVIS_SESSION__PERSISTENCE_BACKEND = request.param
    get_store.cache_clear()
    yield request.param
    get_store.cache_clear()


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob-123")
