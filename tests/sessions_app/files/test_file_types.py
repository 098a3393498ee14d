"""docs/design.md §23: what a file is comes from its bytes alone."""

import io

import pytest
from PIL import Image

from sessions_app.core.file_types import (
    ImageTooManyPixels,
    UnsupportedFile,
    file_type_of,
    thumbnail_png,
)
from tests.sessions_app.files.helpers import ELF_BYTES, pdf_bytes


def image_bytes(fmt: str, size=(30, 20)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (10, 120, 200)).save(out, format=fmt)
    return out.getvalue()


@pytest.mark.parametrize(
    ("fmt", "mime"),
    [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")],
)
def test_the_four_image_formats_with_their_size(fmt, mime):
    found = file_type_of(io.BytesIO(image_bytes(fmt)))
    assert (found.kind, found.mime, found.width, found.height) == ("image", mime, 30, 20)


@pytest.mark.parametrize(
    "content",
    [
        b"# Notes\n\n- a *markdown* list\n",
        b"name,count\nzebra,3\n",
        b'{"json": [1, 2, 3]}',
        "def f():\n    return 'ünïcode'\n".encode(),
        b"",
    ],
)
def test_texts_of_every_kind_are_text(content):
    assert file_type_of(io.BytesIO(content)).mime == "text/plain"


@pytest.mark.parametrize(
    "content",
    [
        ELF_BYTES,
        image_bytes("BMP"),  # an image, but not one of the four a model is sent
        b"%PDF-1.4 but nothing of a PDF after it",
        b"caf\xe9",  # Latin-1, not UTF-8
        b"ok" + b"\x00",
        b"\xe2\x82",  # a character cut in two at the end
    ],
)
def test_everything_else_is_unsupported(content):
    with pytest.raises(UnsupportedFile):
        file_type_of(io.BytesIO(content))


def test_a_pdf_brings_its_text():
    found = file_type_of(io.BytesIO(pdf_bytes("Quarterly zebra count")))
    assert (found.kind, found.mime) == ("pdf", "application/pdf")
    assert "Quarterly zebra count" in found.text


def test_an_image_over_the_pixel_limit_is_refused_before_it_is_decoded(monkeypatch):
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 500)
    with pytest.raises(ImageTooManyPixels):
        file_type_of(io.BytesIO(image_bytes("PNG", (30, 20))))  # 600 pixels


def test_a_thumbnail_keeps_the_shape_within_256_px():
    with Image.open(io.BytesIO(thumbnail_png(image_bytes("JPEG", (600, 900))))) as im:
        assert im.format == "PNG" and im.size == (171, 256)
