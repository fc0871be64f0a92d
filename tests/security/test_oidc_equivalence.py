"""token_verify checks a token itself (PyJWT only parses the keys and runs the signature primitive),
so it is held to PyJWT: every token of a corpus of sound and broken ones carries the verdict it
must get, and both `jwt.decode` — called exactly as token_verify called it before — and
token_verify must give it. Then random edits of a sound token get the same verdict from both.
Keys: RS256, RS384, PS256, ES256, ES384, and a P-384 key that its JWKS mislabels ES256."""

import base64
import hashlib
import hmac
import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from devtools.standin.oidc import github_defaults
from relay.callbacks import oidc
from tests.security.conftest import AUDIENCE, KeyServer

ACCEPT, REFUSE = "accept", "refuse"
DROP = object()
"""A claim or header value that leaves the name out."""
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@pytest.fixture(scope="module")
def world():
    server = KeyServer()
    server.stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for kid, alg, key in [
        ("rs384", "RS384", server.rsa),
        ("ps256", "PS256", server.rsa),
        ("ec-384", "ES384", server.ec384),
        ("p384-as-es256", "ES256", server.ec384),
    ]:
        server.publish(kid, alg, key)
    yield server
    server.stop()


@pytest.fixture
def forge(world, settings):
    settings.CRCR_OIDC_ISSUERS = world.config()
    settings.CRCR_OIDC_JWKS_COOLDOWN_SECONDS = 0
    oidc.reset_clients()
    yield Forge(world)
    oidc.reset_clients()


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segment(obj) -> str:
    return b64(obj if isinstance(obj, bytes) else json.dumps(obj).encode())


class Forge:
    """Compact tokens for the world's published kids, sound or broken in one named way."""

    ALGS = {"rsa-1": "RS256", "rs384": "RS384", "ps256": "PS256", "ec-256": "ES256", "ec-384": "ES384"}
    """The sound kids and their algorithms; `p384-as-es256` is published too, and never sound."""
    SIGNERS = {
        "rsa-1": "rsa",
        "rs384": "rsa",
        "ps256": "rsa",
        "ec-256": "ec256",
        "ec-384": "ec384",
        "p384-as-es256": "ec384",
    }

    def __init__(self, server: KeyServer):
        self.server = server
        self.keys = {key.key_id: key for key in jwt.PyJWKSet.from_dict(server.jwks()).keys}

    def claims(self, **overrides) -> dict:
        return {name: value for name, value in self.server.claims(**overrides).items() if value is not DROP}

    def header(self, kid: str = "rsa-1", /, **overrides) -> dict:
        """`kid`'s header; `overrides` may replace even the kid (the key that signs stays `kid`'s)."""
        header = {"alg": self.ALGS.get(kid, "ES256"), "kid": kid, "typ": "JWT", **overrides}
        return {name: value for name, value in header.items() if value is not DROP}

    def token(self, kid="rsa-1", header=None, signer=None, **claims) -> str:
        """Sound unless told otherwise: `header` overrides header fields, `claims` the claims."""
        head = self.header(kid, **(header or {}))
        return self.signed(segment(head), segment(self.claims(**claims)), head.get("alg"), signer or self.key(kid))

    def signed(self, header_segment: str, claims_segment: str, alg="RS256", key=None) -> str:
        signing_input = f"{header_segment}.{claims_segment}".encode()
        algorithm = jwt.get_algorithm_by_name(alg if alg in oidc.ALLOWED_ALGORITHMS else "RS256")
        return f"{signing_input.decode()}.{b64(algorithm.sign(signing_input, key or self.server.rsa))}"

    def key(self, kid: str):
        return getattr(self.server, self.SIGNERS[kid])

    def raw(self, header=None, claims=None, kid="rsa-1") -> str:
        """A token over raw header/claims bytes, signed with `kid`'s key."""
        head = header if header is not None else json.dumps(self.header(kid)).encode()
        body = claims if claims is not None else json.dumps(self.claims()).encode()
        return self.signed(b64(head), b64(body), self.ALGS.get(kid, "RS256"), self.key(kid))

    def padded(self, which: int, extra: str = "") -> str:
        """A sound token whose segment `which` (0 header, 1 claims) is padded to a multiple of four
        (a filler field makes sure it needs padding), plus `extra`; then signed."""
        for filler in ("", "a", "ab"):
            parts = [segment(self.header(fill=filler)), segment(self.claims(fill=filler))]
            if len(parts[which]) % 4:
                break
        parts[which] += "=" * (-len(parts[which]) % 4) + extra
        return self.signed(*parts)

    def hs256_with_the_public_key(self) -> str:
        pem = self.server.rsa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        signing_input = f"{segment(self.header(alg='HS256'))}.{segment(self.claims())}"
        return f"{signing_input}.{b64(hmac.new(pem, signing_input.encode(), hashlib.sha256).digest())}"


def pyjwt_verdict(forge: Forge, token: str) -> str:
    """The verifier token_verify replaced: the key its kid names if the alg fits it, `jwt.decode`
    with the options token_verify passed, and the lifetime bound (whose overflow on a huge `exp`
    was a 500; here, a refusal)."""
    try:
        header = jwt.get_unverified_header(token)
        key = forge.keys[header["kid"]]
        if header["alg"] != key.algorithm_name or header["alg"] not in oidc.ALLOWED_ALGORITHMS:
            return REFUSE
        claims = jwt.decode(
            token,
            key.key,
            algorithms=[header["alg"]],
            audience=settings.CRCR_OIDC_AUDIENCE,
            issuer=forge.server.url,
            leeway=settings.CRCR_OIDC_LEEWAY_SECONDS,
            options={"require": oidc.REQUIRED_CLAIMS, "strict_aud": False},
        )
        too_long = int(claims["exp"]) - time.time() > settings.CRCR_OIDC_MAX_LIFETIME_SECONDS
    except (jwt.PyJWTError, TypeError, ValueError, KeyError, AttributeError, OverflowError):
        return REFUSE
    return REFUSE if too_long else ACCEPT


def our_verdict(token: str) -> str:
    """Anything but TokenRejected (a 500) fails the test."""
    try:
        oidc.token_verify(token)
    except oidc.TokenRejected:
        return REFUSE
    return ACCEPT


def now() -> int:
    return int(time.time())


def signature_edited(token: str, edit) -> str:
    head, _, signature = token.rpartition(".")
    return f"{head}.{edit(signature)}"


def standard_alphabet(signature: str) -> str:
    """The signature in base64's standard alphabet: the same bytes to Python's lax urlsafe decoder."""
    assert "-" in signature or "_" in signature, "a 342-character signature almost surely has one"
    return signature.translate(str.maketrans("-_", "+/"))


def stray_bits(signature: str) -> str:
    """The last character with an unused low bit set: the same bytes to a lax decoder, not canonical."""
    assert len(signature) % 4 == 2, "a 256- or 64-byte signature leaves four unused bits"
    return signature[:-1] + ALPHABET[ALPHABET.index(signature[-1]) | 1]


LEEWAY = 30  # settings.CRCR_OIDC_LEEWAY_SECONDS, asserted below
CORPUS = [
    # --- sound tokens from every published key ---------------------------------------------------
    ("rs256", ACCEPT, lambda f: f.token("rsa-1")),
    ("rs384", ACCEPT, lambda f: f.token("rs384")),
    ("ps256", ACCEPT, lambda f: f.token("ps256")),
    ("es256", ACCEPT, lambda f: f.token("ec-256")),
    ("es384", ACCEPT, lambda f: f.token("ec-384")),
    ("github-actions-claims", ACCEPT, lambda f: f.token(**github_defaults({}))),
    ("without-nbf", ACCEPT, lambda f: f.token(nbf=DROP)),
    ("float-times", ACCEPT, lambda f: f.token(iat=now() - 0.5, nbf=now() - 0.5, exp=now() + 300.5)),
    ("huge", ACCEPT, lambda f: f.token(blob="x" * 12_000)),
    ("typ-missing", ACCEPT, lambda f: f.token(header={"typ": DROP})),
    ("crit-b64-true", ACCEPT, lambda f: f.token(header={"crit": ["b64"], "b64": True})),
    # --- base64url: padding and alphabet --------------------------------------------------------
    ("header-padded-to-four", ACCEPT, lambda f: f.padded(0)),
    ("claims-padded-to-four", ACCEPT, lambda f: f.padded(1)),
    ("signature-padded-to-four", ACCEPT, lambda f: f.token() + "=="),
    ("signature-over-padded", REFUSE, lambda f: f.token() + "==="),
    ("signature-padded-short-of-four", REFUSE, lambda f: f.token() + "="),
    ("signature-padded-past-four", REFUSE, lambda f: f.token() + "======"),
    ("claims-padded-past-four", REFUSE, lambda f: f.padded(1, "====")),
    ("header-padded-one-too-many", REFUSE, lambda f: f.padded(0, "=")),
    ("equals-inside-the-signature", REFUSE, lambda f: signature_edited(f.token(), lambda s: s[:100] + "==" + s[100:])),
    ("standard-alphabet-signature", REFUSE, lambda f: signature_edited(f.token(), standard_alphabet)),
    ("space-in-signature", REFUSE, lambda f: signature_edited(f.token(), lambda s: s[:100] + " " + s[100:])),
    ("newline-in-claims", REFUSE, lambda f: f.token().replace(".", ".\n", 1)),
    ("bang-in-header", REFUSE, lambda f: "!" + f.token()),
    ("non-ascii-in-signature", REFUSE, lambda f: signature_edited(f.token(), lambda s: s[:-1] + "é")),
    ("stray-bits-in-signature", REFUSE, lambda f: signature_edited(f.token(), stray_bits)),
    ("stray-bits-in-es256-signature", REFUSE, lambda f: signature_edited(f.token("ec-256"), stray_bits)),
    ("signature-length-one-past-four", REFUSE, lambda f: f.token() + "AAA"),
    # --- structure ------------------------------------------------------------------------------
    ("two-segments", REFUSE, lambda f: f.token().rpartition(".")[0]),
    ("empty-signature", REFUSE, lambda f: f.token().rpartition(".")[0] + "."),
    ("four-segments", REFUSE, lambda f: f.token() + ".AAAA"),
    ("empty-header-segment", REFUSE, lambda f: "." + f.token().split(".", 1)[1]),
    ("truncated-signature", REFUSE, lambda f: f.token()[:-4]),
    ("truncated-claims", REFUSE, lambda f: (lambda h, c, s: f"{h}.{c[:-7]}.{s}")(*f.token().split("."))),
    ("empty", REFUSE, lambda f: ""),
    ("dots-only", REFUSE, lambda f: ".."),
    ("header-not-json", REFUSE, lambda f: f.raw(header=b"{alg: RS256}")),
    ("header-a-list", REFUSE, lambda f: f.raw(header=b'["RS256"]')),
    ("header-a-string", REFUSE, lambda f: f.raw(header=b'"RS256"')),
    ("header-not-utf8", REFUSE, lambda f: f.raw(header=b'{"alg":"RS256","kid":"rsa-1","x":"\xff"}')),
    ("header-nested-past-recursion", REFUSE, lambda f: f.raw(header=b"[" * 5000)),
    ("claims-not-json", REFUSE, lambda f: f.raw(claims=b"iss=me")),
    ("claims-a-list", REFUSE, lambda f: f.raw(claims=json.dumps([f.claims()]).encode())),
    ("claims-null", REFUSE, lambda f: f.raw(claims=b"null")),
    ("claims-nested-past-recursion", REFUSE, lambda f: f.raw(claims=b'{"a":' * 5000)),
    ("claims-utf16", ACCEPT, lambda f: f.raw(claims=json.dumps(f.claims()).encode("utf-16"))),
    # --- signature and algorithm ------------------------------------------------------------------
    (
        "bit-flipped-signature",
        REFUSE,
        lambda f: (lambda t: t[:-10] + ("A" if t[-10] != "A" else "B") + t[-9:])(f.token()),
    ),
    ("signed-by-another-rsa-key", REFUSE, lambda f: f.token(signer=f.server.stranger)),
    ("es256-signed-by-the-p384-key", REFUSE, lambda f: f.token("ec-256", signer=f.server.ec384)),
    ("p384-key-labelled-es256", REFUSE, lambda f: f.token("p384-as-es256", signer=f.server.ec384)),
    ("rs256-signature-under-the-rs384-kid", REFUSE, lambda f: f.token("rs384", header={"alg": "RS256"})),
    ("ps256-header-on-the-rs256-kid", REFUSE, lambda f: f.token("rsa-1", header={"alg": "PS256"})),
    ("rs256-header-on-the-ps256-kid", REFUSE, lambda f: f.token("ps256", header={"alg": "RS256"})),
    ("es256-header-on-the-rsa-kid", REFUSE, lambda f: f.token("rsa-1", header={"alg": "ES256"}, signer=f.server.ec256)),
    ("alg-none", REFUSE, lambda f: f"{segment(f.header(alg='none'))}.{segment(f.claims())}."),
    ("alg-none-lowercase-signed", REFUSE, lambda f: f.token(header={"alg": "None"})),
    ("hs256-keyed-with-the-public-key", REFUSE, lambda f: f.hs256_with_the_public_key()),
    ("alg-missing", REFUSE, lambda f: f.token(header={"alg": DROP})),
    ("alg-a-list", REFUSE, lambda f: f.token(header={"alg": ["RS256"]})),
    ("kid-missing", REFUSE, lambda f: f.token(header={"kid": DROP})),
    ("kid-empty", REFUSE, lambda f: f.token(header={"kid": ""})),
    ("kid-a-number", REFUSE, lambda f: f.token(header={"kid": 1})),
    ("kid-unknown", REFUSE, lambda f: f.token(header={"kid": "rsa-9"})),
    # --- critical extensions ----------------------------------------------------------------------
    ("crit-unknown", REFUSE, lambda f: f.token(header={"crit": ["exp"], "exp": 1})),
    ("crit-empty", REFUSE, lambda f: f.token(header={"crit": []})),
    ("crit-a-string", REFUSE, lambda f: f.token(header={"crit": "b64", "b64": True})),
    ("crit-b64-absent", REFUSE, lambda f: f.token(header={"crit": ["b64"]})),
    ("crit-b64-false", REFUSE, lambda f: f.token(header={"crit": ["b64"], "b64": False})),
    ("b64-false-uncritical", REFUSE, lambda f: f.token(header={"b64": False})),
    ("b64-zero", ACCEPT, lambda f: f.token(header={"b64": 0})),
    # --- required claims ------------------------------------------------------------------------
    *[(f"{name}-missing", REFUSE, lambda f, n=name: f.token(**{n: DROP})) for name in oidc.REQUIRED_CLAIMS],
    *[(f"{name}-null", REFUSE, lambda f, n=name: f.token(**{n: None})) for name in oidc.REQUIRED_CLAIMS],
    # --- times ----------------------------------------------------------------------------------
    ("exp-past", REFUSE, lambda f: f.token(exp=now() - 600, iat=now() - 900, nbf=now() - 900)),
    ("exp-just-past-the-leeway", REFUSE, lambda f: f.token(exp=now() - LEEWAY - 5)),
    ("exp-at-the-leeway", REFUSE, lambda f: f.token(exp=now() - LEEWAY)),
    ("exp-just-within-the-leeway", ACCEPT, lambda f: f.token(exp=now() - LEEWAY + 5)),
    ("exp-a-word", REFUSE, lambda f: f.token(exp="soon")),
    ("exp-true", REFUSE, lambda f: f.token(exp=True)),
    ("exp-a-list", REFUSE, lambda f: f.token(exp=[now() + 300])),
    ("exp-an-object", REFUSE, lambda f: f.token(exp={"at": now() + 300})),
    ("exp-a-numeric-string", ACCEPT, lambda f: f.token(exp=str(now() + 300))),  # PyJWT's int(), kept
    (
        "exp-nan",
        REFUSE,
        lambda f: f.raw(claims=json.dumps(f.claims()).replace('"exp": ', '"exp": NaN, "x": ').encode()),
    ),
    ("exp-infinity", REFUSE, lambda f: f.raw(claims=json.dumps(f.claims(exp=float("inf"))).encode())),
    ("exp-past-float-range", REFUSE, lambda f: f.token(exp=10**400)),
    ("exp-past-the-lifetime-bound", REFUSE, lambda f: f.token(exp=now() + 32 * 24 * 3600)),
    ("iat-future", REFUSE, lambda f: f.token(iat=now() + 3600)),
    ("iat-just-past-the-leeway", REFUSE, lambda f: f.token(iat=now() + LEEWAY + 5)),
    ("iat-just-within-the-leeway", ACCEPT, lambda f: f.token(iat=now() + LEEWAY - 5)),
    ("iat-a-word", REFUSE, lambda f: f.token(iat="now")),
    ("iat-a-list", REFUSE, lambda f: f.token(iat=[now()])),
    ("iat-true", ACCEPT, lambda f: f.token(iat=True)),  # int(True) is 1, long ago: PyJWT's reading, kept
    ("iat-a-numeric-string", ACCEPT, lambda f: f.token(iat=str(now()))),
    ("nbf-future", REFUSE, lambda f: f.token(nbf=now() + 3600)),
    ("nbf-just-within-the-leeway", ACCEPT, lambda f: f.token(nbf=now() + LEEWAY - 5)),
    ("nbf-null", REFUSE, lambda f: f.token(nbf=None)),
    ("nbf-a-word", REFUSE, lambda f: f.token(nbf="later")),
    # --- issuer -----------------------------------------------------------------------------------
    ("iss-wrong", REFUSE, lambda f: f.token(iss="https://token.actions.githubusercontent.com")),
    ("iss-with-a-trailing-slash", REFUSE, lambda f: f.token(iss=f.server.url + "/")),
    ("iss-upper-case", REFUSE, lambda f: f.token(iss=f.server.url.upper())),
    ("iss-a-list", REFUSE, lambda f: f.token(iss=[f.server.url])),
    ("iss-a-number", REFUSE, lambda f: f.token(iss=5)),
    # --- audience ---------------------------------------------------------------------------------
    ("aud-wrong", REFUSE, lambda f: f.token(aud="https://github.com/someone")),
    ("aud-list-with-ours", ACCEPT, lambda f: f.token(aud=["https://github.com/someone", AUDIENCE])),
    ("aud-list-without-ours", REFUSE, lambda f: f.token(aud=["https://github.com/someone", "other"])),
    ("aud-list-with-ours-and-a-number", REFUSE, lambda f: f.token(aud=[AUDIENCE, 7])),
    ("aud-empty-string", REFUSE, lambda f: f.token(aud="")),
    ("aud-empty-list", REFUSE, lambda f: f.token(aud=[])),
    ("aud-an-object", REFUSE, lambda f: f.token(aud={AUDIENCE: True})),
    ("aud-a-prefix-of-ours", REFUSE, lambda f: f.token(aud=AUDIENCE[:-1])),
    # --- other registered claims ------------------------------------------------------------------
    ("jti-a-number", REFUSE, lambda f: f.token(jti=12)),
    ("sub-a-number", REFUSE, lambda f: f.token(sub=12)),
    ("sub-null", REFUSE, lambda f: f.token(sub=None)),
]


def test_the_corpus_names_each_case_once_and_assumes_the_configured_leeway():
    assert len({name for name, _, _ in CORPUS}) == len(CORPUS)
    assert settings.CRCR_OIDC_LEEWAY_SECONDS == LEEWAY


@pytest.mark.parametrize("audience", [AUDIENCE, ["another-relay", AUDIENCE]], ids=["one-audience", "audiences"])
@pytest.mark.parametrize("name, verdict, make", CORPUS, ids=[name for name, _, _ in CORPUS])
def test_pyjwt_and_token_verify_give_every_corpus_token_its_verdict(forge, settings, audience, name, verdict, make):
    settings.CRCR_OIDC_AUDIENCE = audience
    token = make(forge)
    assert (pyjwt_verdict(forge, token), our_verdict(token)) == (verdict, verdict)


EDITS = st.tuples(
    st.integers(min_value=0), st.sampled_from(["replace", "insert", "delete"]), st.sampled_from(ALPHABET + ".=+/ é\n")
)


@hypothesis_settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(EDITS, min_size=1, max_size=3), kid=st.sampled_from(sorted(Forge.ALGS)))
def test_a_sound_token_edited_at_random_gets_the_same_verdict_from_both(forge, edits, kid):
    token = forge.token(kid)
    for position, edit, character in edits:
        at = position % (len(token) + 1)
        token = {
            "replace": token[:at] + character + token[at + 1 :],
            "insert": token[:at] + character + token[at:],
            "delete": token[:at] + token[at + 1 :],
        }[edit]
    assert our_verdict(token) == pyjwt_verdict(forge, token)
