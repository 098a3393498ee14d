"""docs/design.md §28: a PNG a run writes with matplotlib is a file of the result,
downloadable, and shown to a model that sees images — the fake OpenAI server, reached
through the official SDK, receives it as an image part after the run's result."""

import base64
import io
import json

import pytest
from PIL import Image

from tests.fakes.llm_server import Reply, serving_both_sdks

pytestmark = pytest.mark.django_db(transaction=True)

PLOT = (
    "import matplotlib.pyplot as plt\n"
    "plt.figure(figsize=(4, 3), dpi=50)\n"
    "plt.bar(['jan', 'feb', 'mar'], [120, 80, 95])\n"
    "plt.savefig('spending.png')\n"
    "print('saved')\n"
)


@pytest.fixture
def server(settings):
    with serving_both_sdks(settings) as running:
        yield running


def test_a_plot_comes_back_as_a_file_and_the_model_sees_it(backend, sandbox, server, api):
    api.post("/api/sessions/", {"id": "plot"}, format="json")
    api.patch("/api/sessions/plot/", {"model": "openai:gpt-4o"}, format="json")
    server.script(
        Reply(calls=[("run_code", {"language": "python", "code": PLOT})]),
        Reply(text="Here is your spending by month."),
    )

    answer = api.post("/api/sessions/plot/messages/", {"text": "plot it"}, format="json").json()

    assert answer["status"] == "completed", answer
    (result,) = [e for e in answer["entries"] if e["role"] == "tool"]
    run = json.loads(result["content"])
    assert run["stdout"] == "saved\n"
    (file,) = run["files"]
    assert (file["path"], file["mime"]) == ("spending.png", "image/png")
    assert result["data"]["files"] == [file | {"width": 200, "height": 150}]

    download = api.get(f"/api/sessions/plot/files/{file['id']}/")
    png = b"".join(download.streaming_content)
    assert download["Content-Type"] == "image/png"
    assert Image.open(io.BytesIO(png)).size == (200, 150)
    assert b"".join(api.get("/api/sessions/plot/workspace/spending.png").streaming_content) == png

    assert server.refusals == []
    sent = server.requests[-1]["messages"]
    tool_index = next(i for i, m in enumerate(sent) if m["role"] == "tool")
    shown = sent[tool_index + 1]
    assert shown["role"] == "user"
    encoded = base64.b64encode(png).decode()
    assert shown["content"][0] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{encoded}"},
    }
