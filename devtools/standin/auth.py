"""Who is calling: App JWTs (checked with GitHub's own error messages) and installation tokens."""

import time

from .http import Call, HTTPError
from .keys import split_jwt

JWT_UNDECODABLE = "A JSON web token could not be decoded"
IAT_INVALID = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
EXP_INVALID = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
EXP_TOO_FAR = "'Expiration time' claim ('exp') is too far in the future"
ISS_INVALID = "'Issuer' claim ('iss') must be an Integer"
CLOCK_SKEW = 60
"""Seconds of drift tolerated on iat, and on top of the ten-minute JWT lifetime."""
MAX_JWT_LIFETIME = 600


def credentials(call: Call) -> str | None:
    """The token from `Authorization: Bearer X` or `token X`; "" for an unusable header."""
    header = call.request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() in ("bearer", "token") else ""


def app_jwt(call: Call) -> dict:
    """The verified claims of the App JWT on this request, or the 401 GitHub would send."""
    world, token = call.standin.world, credentials(call)
    if token is None:
        raise HTTPError(401, "Requires authentication")
    if token.count(".") != 2:
        # An installation token is a real credential, just not a JWT; anything else is noise.
        raise HTTPError(401, JWT_UNDECODABLE if token in world.tokens else "Bad credentials")
    try:
        header, claims, signing_input, signature = split_jwt(token)
    except ValueError:
        raise HTTPError(401, JWT_UNDECODABLE) from None
    _check_issuer(claims.get("iss"), world)
    if header.get("alg") != "RS256" or not world.app_key.verify(signature, signing_input):
        raise HTTPError(401, JWT_UNDECODABLE)
    _check_times(claims)
    return claims


def _check_issuer(iss, world) -> None:
    if iss == world.client_id:
        return
    if isinstance(iss, bool) or not isinstance(iss, (int, str)) or not str(iss).isdigit():
        raise HTTPError(401, ISS_INVALID)
    if int(iss) != world.app_id:
        raise HTTPError(401, "Integration not found")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_times(claims: dict) -> None:
    now, iat, exp = time.time(), claims.get("iat"), claims.get("exp")
    if not _is_number(iat) or iat > now + CLOCK_SKEW:
        raise HTTPError(401, IAT_INVALID)
    if not _is_number(exp) or exp <= now:
        raise HTTPError(401, EXP_INVALID)
    if exp - iat > MAX_JWT_LIFETIME + CLOCK_SKEW:
        raise HTTPError(401, EXP_TOO_FAR)


def installation_grant(call: Call, required: bool = True) -> dict | None:
    """The grant behind the installation token on this request; a bad token is always a 401."""
    token = credentials(call)
    if token is None and not required:
        return None
    if token is None:
        raise HTTPError(401, "Requires authentication")
    return call.standin.world.grant(token)
