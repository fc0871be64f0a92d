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
    """Discovery and JWKS over real HTTP: `rsa-1` (RS256), `ec-256` (ES256, P-256), and whatever
    `publish` adds."""

    def __init__(self):
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec256 = ec.generate_private_key(ec.SECP256R1())
        self.ec384 = ec.generate_private_key(ec.SECP384R1())
        self.published: dict[str, tuple[str, object]] = {}
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

    def publish(self, kid: str, alg: str, private_key) -> None:
        """Also serve `private_key`'s public half under `kid`, labelled `alg` (rightly or not)."""
        self.published[kid] = (alg, private_key)

    def jwks(self) -> dict:
        keys = {"rsa-1": ("RS256", self.rsa), "ec-256": ("ES256", self.ec256), **self.published}
        return {"keys": [{**public_jwk(key), "kid": kid, "alg": alg, "use": "sig"} for kid, (alg, key) in keys.items()]}

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


def public_jwk(private_key) -> dict:
    family = jwt.algorithms.RSAAlgorithm if isinstance(private_key, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
    return json.loads(family.to_jwk(private_key.public_key()))


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
