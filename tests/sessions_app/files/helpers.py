"""Files a test uploads: real images made with Pillow, texts, a PDF, a program."""

import io
import zlib

from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

# The first bytes of a Linux program: ELF magic, 64-bit, little-endian, then padding.
ELF_BYTES = b"\x7fELF\x02\x01\x01\x00" + bytes(56) + b"\x00\x00\x00\x00" * 64


def png_bytes(width: int = 40, height: int = 30, color=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def pdf_bytes(text: str) -> bytes:
    """A one-page PDF whose page shows `text` (a minimal PDF written by hand: Helvetica)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def upload(client, session_id: str, name: str, content: bytes, content_type="image/png"):
    """POST the file as a browser would, under `name`, declaring `content_type` (which the
    server never believes)."""
    return client.post(
        f"/api/sessions/{session_id}/files/",
        {"file": SimpleUploadedFile(name, content, content_type=content_type)},
        format="multipart",
    )


def shared_stream_pdf(pages: int, operators: int) -> bytes:
    """A small PDF whose `pages` pages all draw one compressed content stream of `operators`
    text-showing operators: each page's text is that whole stream parsed again (about 2.5 s
    per 200,000 operators in pypdf), from a file of a few tens of KB."""
    content = b"BT /F1 1 Tf " + b"(x) Tj " * operators + b"ET"
    packed = zlib.compress(content, 9)
    kids = " ".join(f"{4 + n} 0 R" for n in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream",
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources "
        b"<< /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >> >>"
    )
    return _pdf_of([*objects, *[page] * pages])


def _pdf_of(objects: list[bytes]) -> bytes:
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    out.write(
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    return out.getvalue()


def multipart(content: bytes, name: str, field: str = "file") -> tuple[bytes, str]:
    """A multipart body holding one file, and its Content-Type."""
    boundary = "jarvis-file-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
            f'filename="{name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"
