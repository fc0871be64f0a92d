"""RSA signing keys and hand-rolled compact JWTs.

JWTs are assembled here rather than with PyJWT so the stand-in can also produce tokens PyJWT
refuses to make (alg "none", HS256 keyed with a public PEM) and read tokens without PyJWT
second-guessing the claims GitHub reports errors about."""

import base64
import hashlib
import hmac
import json

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _int_b64(number: int) -> str:
    return b64url(number.to_bytes((number.bit_length() + 7) // 8, "big"))


class SigningKey:
    """A 2048-bit RSA key pair (GitHub's size; PyJWT warns below it)."""

    def __init__(self, private_pem: str | None = None):
        if private_pem:
            # Our own key file: the consistency check would double the stand-in's start-up time.
            load = serialization.load_pem_private_key
            self.private = load(private_pem.encode(), password=None, unsafe_skip_rsa_key_validation=True)
        else:
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public = self.private.public_key()
        self.kid = self._thumbprint()

    def _thumbprint(self) -> str:
        # RFC 7638: a kid that is stable for the key and says nothing else about it.
        numbers = self.public.public_numbers()
        canonical = json.dumps(
            {"e": _int_b64(numbers.e), "kty": "RSA", "n": _int_b64(numbers.n)}, separators=(",", ":")
        )
        return b64url(hashlib.sha256(canonical.encode()).digest())

    def private_pem(self) -> str:
        fmt = serialization.PrivateFormat.PKCS8
        return self.private.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()).decode()

    def public_pem(self) -> bytes:
        fmt = serialization.PublicFormat.SubjectPublicKeyInfo
        return self.public.public_bytes(serialization.Encoding.PEM, fmt)

    def jwk(self) -> dict:
        numbers = self.public.public_numbers()
        return {
            "kty": "RSA",
            "alg": "RS256",
            "use": "sig",
            "kid": self.kid,
            "n": _int_b64(numbers.n),
            "e": _int_b64(numbers.e),
        }

    def sign(self, data: bytes) -> bytes:
        return self.private.sign(data, padding.PKCS1v15(), hashes.SHA256())

    def verify(self, signature: bytes, data: bytes) -> bool:
        try:
            self.public.verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            return False
        return True


def _segment(obj: dict) -> str:
    return b64url(json.dumps(obj, separators=(",", ":")).encode())


def encode_jwt(header: dict, payload: dict, key: SigningKey | None = None, hmac_secret: bytes | None = None) -> str:
    """RS256 with `key`, HS256 with `hmac_secret`, or unsigned (alg none) with neither."""
    signing_input = f"{_segment(header)}.{_segment(payload)}"
    if key is not None:
        return f"{signing_input}.{b64url(key.sign(signing_input.encode()))}"
    if hmac_secret is not None:
        return f"{signing_input}.{b64url(hmac.new(hmac_secret, signing_input.encode(), hashlib.sha256).digest())}"
    return f"{signing_input}."


def split_jwt(token: str) -> tuple[dict, dict, bytes, bytes]:
    """(header, claims, signing input, signature); ValueError when it is not a compact JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("not a compact JWT")
    try:
        header, claims = json.loads(b64url_decode(parts[0])), json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError("undecodable JWT") from exc
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise ValueError("JWT segments are not objects")
    return header, claims, f"{parts[0]}.{parts[1]}".encode(), signature
