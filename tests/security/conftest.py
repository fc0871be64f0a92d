"""The security suite's world: a small OIDC issuer of its own that publishes an RSA and an EC key
(the stand-in publishes RSA only) and can be made to fail or hang, counting every fetch."""

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

AUDIENCE = "pytorch-cross-repo-ci-relay"


class KeyServer:
    """Discovery and JWKS over real HTTP: `rsa-1` (RS256), `ec-256` (ES256, P-256)."""

    def __init__(self):
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec256 = ec.generate_private_key(ec.SECP256R1())
        self.ec384 = ec.generate_private_key(ec.SECP384R1())
        self.fetches: list[str] = []
        self.mode = "ok"  # ok | fail | hang
        self.hang_seconds = 10.0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.fetches.append(self.path)
                if outer.mode == "fail":
                    return self._send(502, {"message": "bad gateway"})
                if outer.mode == "hang":
                    time.sleep(outer.hang_seconds)
                if self.path.endswith("/.well-known/openid-configuration"):
                    return self._send(200, {"issuer": outer.url, "jwks_uri": outer.url + "/jwks"})
                if self.path.endswith("/jwks"):
                    return self._send(200, outer.jwks())
                return self._send(404, {})

            def _send(self, status, body):
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/issuer"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def jwks(self) -> dict:
        rsa_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.rsa.public_key()))
        ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.ec256.public_key()))
        return {
            "keys": [
                {**rsa_jwk, "kid": "rsa-1", "alg": "RS256", "use": "sig"},
                {**ec_jwk, "kid": "ec-256", "alg": "ES256", "use": "sig"},
            ]
        }

    def claims(self, **overrides) -> dict:
        now = int(time.time())
        return {
            "iss": self.url,
            "aud": AUDIENCE,
            "iat": now,
            "nbf": now,
            "exp": now + 300,
            "jti": str(uuid.uuid4()),
            "repository": "sec-org/backend",
            "repository_id": "9100",
            **overrides,
        }

    def mint(self, alg: str, kid: str, signer=None, **claims) -> str:
        """A token signed with `signer` (default: the key that fits `alg`) under header `kid`."""
        signer = signer or {"RS256": self.rsa, "ES256": self.ec256, "ES384": self.ec384}[alg]
        return jwt.encode(self.claims(**claims), signer, algorithm=alg, headers={"kid": kid})

    def config(self, with_jwks_uri: bool = True) -> list[dict]:
        return [{"issuer": self.url, "kind": "github", **({"jwks_uri": self.url + "/jwks"} if with_jwks_uri else {})}]

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def keyserver(settings):
    from relay.callbacks import oidc

    server = KeyServer()
    settings.CRCR_OIDC_ISSUERS = server.config()
    settings.CRCR_OIDC_JWKS_COOLDOWN_SECONDS = 0
    oidc.reset_clients()
    yield server
    server.mode = "ok"
    server.stop()
    oidc.reset_clients()
