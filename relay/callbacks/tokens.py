"""The `callback_token` put in each dispatch's client_payload: signed by the relay, it binds one
delivery to one downstream repo, PR number and head SHA, so a callback can prove it answers a
dispatch the relay really sent (the existing relay has no such binding)."""

import time
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.core import signing

from relay.models.deliveries import CALLBACK_TOKEN_MAX_AGE_SECONDS

SALT = "crcr.callback-token.v1"


@dataclass(frozen=True)
class CallbackBinding:
    delivery_guid: str
    repo: str
    pr_number: int | None
    head_sha: str


class InvalidCallbackToken(Exception):
    pass


def callback_token_sign(binding: CallbackBinding) -> str:
    data = {"d": binding.delivery_guid, "r": binding.repo.lower(), "p": binding.pr_number, "s": binding.head_sha}
    return signing.dumps(data, salt=SALT, compress=True)


def callback_token_read(token: str) -> CallbackBinding:
    """What the token binds, once its signature proves it the relay's and it is not too old.
    Every callback of a dispatch echoes the same token (in_progress and completed, for each of
    its jobs), so its signature check is remembered (`_signed`), keyed by the signing keys too;
    its age is checked every time."""
    binding, signed_at = _signed(token, settings.SECRET_KEY, tuple(settings.SECRET_KEY_FALLBACKS))
    if time.time() - signed_at > CALLBACK_TOKEN_MAX_AGE_SECONDS:
        raise InvalidCallbackToken("callback_token has expired")
    return binding


@lru_cache(maxsize=4096)
def _signed(token: str, key: str, fallbacks: tuple) -> tuple[CallbackBinding, float]:
    """The binding and when it was signed, for a token the relay signed (`key` and `fallbacks`
    key the cache: Django's signer reads them from settings); a refusal is not remembered."""
    try:
        data = signing.loads(token, salt=SALT, max_age=CALLBACK_TOKEN_MAX_AGE_SECONDS)
    except signing.SignatureExpired as exc:
        raise InvalidCallbackToken("callback_token has expired") from exc
    except signing.BadSignature as exc:
        raise InvalidCallbackToken("callback_token is not one the relay signed") from exc
    signed_at = signing.b62_decode(token.rsplit(":", 2)[-2])  # Django signs as "value:timestamp:signature"
    return CallbackBinding(delivery_guid=data["d"], repo=data["r"], pr_number=data["p"], head_sha=data["s"]), signed_at
