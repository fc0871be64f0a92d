"""The `callback_token` put in each dispatch's client_payload: signed by the relay, it binds one
delivery to one downstream repo, PR number and head SHA, so a callback can prove it answers a
dispatch the relay really sent (the existing relay has no such binding)."""

from dataclasses import dataclass

from django.core import signing

SALT = "crcr.callback-token.v1"
MAX_AGE_SECONDS = 7 * 24 * 3600
"""A dispatch may wait days for a runner; re-runs reuse the original payload for as long."""


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
    try:
        data = signing.loads(token, salt=SALT, max_age=MAX_AGE_SECONDS)
    except signing.SignatureExpired as exc:
        raise InvalidCallbackToken("callback_token has expired") from exc
    except signing.BadSignature as exc:
        raise InvalidCallbackToken("callback_token is not one the relay signed") from exc
    return CallbackBinding(delivery_guid=data["d"], repo=data["r"], pr_number=data["p"], head_sha=data["s"])
