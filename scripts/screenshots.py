"""Screenshots of the web chat for the docs: `make screenshots`.

Starts the app (Daphne) on a throwaway SQLite database, signs in with Chromium, holds a short
conversation with a tool call and a markdown answer, and writes PNGs at desktop size and at
phone size (390×844), in the light and the dark theme, to docs/screenshots/.

The model is the test suite's fake OpenAI-compatible server (tests/fakes/llm_server.py) with
scripted replies, so the pictures show what a real model's markdown looks like and come out
the same on every run. Needs Chromium at /usr/bin/chromium (or CHROMIUM=<path>).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakes.llm_server import FakeLLMServer, Reply  # noqa: E402

OUT = REPO / "docs" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
]
USERNAME, PASSWORD = "ada", "screenshots only"
# Browser context options, as a laptop and a phone report themselves.
SIZES = {
    "desktop": {"viewport": {"width": 1440, "height": 900}, "device_scale_factor": 1},
    "phone": {
        "viewport": {"width": 390, "height": 844},
        "device_scale_factor": 2,
        "has_touch": True,
        "is_mobile": True,
    },
}

FIRST_QUESTION = "What is 17 × 23? And how would I write that in Python?"
FIRST_ANSWER = """**17 × 23 = 391** — I checked it with the calculator.

In Python it is one expression; a small function makes it reusable:

```python
def multiply(a: int, b: int) -> int:
    return a * b

print(multiply(17, 23))  # 391
```"""
SECOND_QUESTION = "When should I use a list and when a tuple?"
SECOND_ANSWER = """| | list | tuple |
|---|---|---|
| Can change | yes | no |
| Written as | `[1, 2, 3]` | `(1, 2, 3)` |
| Good for | items you add or remove | fixed records |

Use a **tuple** as a dictionary key; a **list** when you append or sort."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def app_env(workdir: Path, model_url: str) -> dict:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"sqlite:///{workdir / 'screenshots.sqlite3'}",
        SESSIONS_DIR=str(workdir / "sessions"),
        EXPORTS_DIR=str(workdir / "exports"),
        JARVIS_MODEL="openai:gpt-4o-mini",
        OPENAI_BASE_URL=model_url,
        OPENAI_API_KEY="screenshots",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_SETTINGS_MODULE="jarvis_site.settings",
        DJANGO_SUPERUSER_USERNAME=USERNAME,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
        DJANGO_SUPERUSER_EMAIL="ada@example.com",
    )
    env.pop("REDIS_URL", None)
    return env


def manage(env: dict, *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=env, check=True)


def start_server(env: dict, port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "jarvis_site.asgi:application",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"daphne exited with {server.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2).close()
            return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                server.terminate()
                raise RuntimeError("daphne did not answer in time") from None
            time.sleep(0.2)


def ask(page, text: str) -> None:
    """Send a prompt and wait until its answer is stored and the page is idle again."""
    answers = page.locator(".msg.assistant[data-seq]").count()
    page.fill("#prompt", text)
    page.keyboard.press("Enter")
    page.wait_for_function(
        "n => document.querySelectorAll('.msg.assistant[data-seq]').length > n", arg=answers
    )
    page.locator(".regenerate").wait_for()


def converse(browser, base: str, state: Path) -> str:
    context = browser.new_context(**SIZES["desktop"])
    page = context.new_page()
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", USERNAME)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.locator("#connection[data-state=open]").wait_for()
    ask(page, FIRST_QUESTION)
    ask(page, SECOND_QUESTION)
    url = page.url
    context.storage_state(path=str(state))
    context.close()
    return url


def shoot(browser, url: str, state: Path, size: str, scheme: str) -> Path:
    context = browser.new_context(**SIZES[size], color_scheme=scheme, storage_state=str(state))
    page = context.new_page()
    page.goto(url)
    page.locator("#connection[data-state=open]").wait_for()
    page.locator(".regenerate").wait_for()
    page.locator("#cost:not(:empty)").wait_for()
    # Opening a conversation shows its latest turn, as a person would see it.
    page.evaluate("document.getElementById('log').scrollTop = 1e9")
    target = OUT / f"chat-{size}-{scheme}.png"
    page.screenshot(path=str(target))
    context.close()
    return target


def main() -> None:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as workdir, FakeLLMServer() as model:
        model.script(
            Reply(calls=[("calculator", {"expression": "17*23"})]),
            Reply(text=FIRST_ANSWER, input_tokens=412, output_tokens=96),
            Reply(text=SECOND_ANSWER, input_tokens=530, output_tokens=121),
        )
        env = app_env(Path(workdir), model.openai_url)
        manage(env, "migrate", "--noinput", "-v", "0")
        manage(env, "createsuperuser", "--noinput")
        port = free_port()
        server = start_server(env, port)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
                try:
                    state = Path(workdir) / "signed-in.json"
                    url = converse(browser, f"http://127.0.0.1:{port}", state)
                    for size in SIZES:
                        for scheme in ("light", "dark"):
                            print(shoot(browser, url, state, size, scheme).relative_to(REPO))
                finally:
                    browser.close()
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
