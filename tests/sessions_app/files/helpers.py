"""Files a test uploads: real images made with Pillow, texts, a PDF, a program."""

import io

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
