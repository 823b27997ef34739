"""A self-signed certificate for a test's own TLS server, made by the openssl command."""

import subprocess
from pathlib import Path


def self_signed(folder: Path, common_name: str, *options: str) -> tuple[Path, Path]:
    """(cert, key) written in `folder`: a certificate for `common_name` valid for a day;
    `options` are more of `openssl req`'s (e.g. "-addext", "subjectAltName=DNS:…")."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", f"/CN={common_name}", "-keyout", str(key), "-out", str(cert), *options],
        check=True,
        capture_output=True,
    )
    return cert, key
