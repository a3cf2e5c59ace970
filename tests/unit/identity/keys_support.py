"""Keys and tokens for identity tests: an issuer's RSA and EC keys, its JWKS, and tokens it signs."""

from __future__ import annotations

import json
import time
from typing import Any, Final

import attrs
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER: Final = "https://idp.example"
RESOURCE: Final = "https://gw.example/mcp"


@attrs.define
class SigningIssuer:
    """An issuer with one RSA and one EC key, publishing both."""

    issuer: str = ISSUER
    rsa_key: rsa.RSAPrivateKey = attrs.field(factory=lambda: rsa.generate_private_key(65537, 2048))
    ec_key: ec.EllipticCurvePrivateKey = attrs.field(factory=lambda: ec.generate_private_key(ec.SECP256R1()))

    def jwks(self) -> dict[str, Any]:
        rsa_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.rsa_key.public_key()))
        ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.ec_key.public_key()))
        return {
            "keys": [
                {**rsa_jwk, "kid": "rsa-1", "alg": "RS256", "use": "sig"},
                {**ec_jwk, "kid": "ec-1", "use": "sig"},
            ]
        }

    def rsa_public_pem(self) -> bytes:
        return self.rsa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        base = {"iss": self.issuer, "sub": "alice", "aud": RESOURCE, "iat": now, "exp": now + 300}
        return {key: value for key, value in {**base, **overrides}.items() if value is not None}

    def token(self, kid: str = "rsa-1", algorithm: str = "RS256", **overrides: Any) -> str:
        key = self.rsa_key if algorithm.startswith(("RS", "PS")) else self.ec_key
        return jwt.encode(self.claims(**overrides), key, algorithm=algorithm, headers={"kid": kid})
