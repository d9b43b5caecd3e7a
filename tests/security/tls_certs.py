"""Throwaway PKI for the TLS tests, made with the ``openssl`` CLI (``cryptography`` is not a
dependency): a CA, a server certificate for 127.0.0.1 / localhost, a client certificate
from the same CA and one from an unrelated CA (which mTLS must refuse)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    server: Pair
    client: Pair
    rogue_client: Pair  # signed by another CA

    def client_context(self, with_cert: bool = True) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        if with_cert:
            context.load_cert_chain(str(self.client.cert), str(self.client.key))
        return context


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(name: str, where: Path) -> Pair:
    pair = Pair(where / f"{name}.crt", where / f"{name}.key")
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", str(pair.key), "-out", str(pair.cert), "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=where,
    )  # fmt: skip
    return pair


def _leaf(name: str, ca: Pair, usage: str, where: Path, san: str = "") -> Pair:
    pair = Pair(where / f"{name}.crt", where / f"{name}.key")
    csr = where / f"{name}.csr"
    ext = where / f"{name}.ext"
    lines = ["basicConstraints=CA:FALSE", f"extendedKeyUsage={usage}"]
    if san:
        lines.append(f"subjectAltName={san}")
    ext.write_text("\n".join(lines) + "\n")
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", str(pair.key), "-out", str(csr), "-subj", f"/CN={name}", cwd=where,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key), "-CAcreateserial",
        "-out", str(pair.cert), "-days", "2", "-extfile", str(ext), cwd=where,
    )  # fmt: skip
    return pair


def make_pki(where: Path) -> Pki:
    if shutil.which("openssl") is None:
        raise RuntimeError("the TLS tests need the openssl CLI (Debian package: openssl)")
    ca, other = _ca("test-ca", where), _ca("rogue-ca", where)
    return Pki(
        ca=ca.cert,
        server=_leaf("server", ca, "serverAuth", where, "DNS:localhost,IP:127.0.0.1"),
        client=_leaf("client", ca, "clientAuth", where),
        rogue_client=_leaf("rogue-client", other, "clientAuth", where),
    )
