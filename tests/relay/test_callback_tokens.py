"""The callback_token: what it binds, its signature remembered, its age checked every time."""

import time

import pytest

from relay.callbacks import tokens
from relay.callbacks.tokens import CallbackBinding, InvalidCallbackToken, callback_token_read, callback_token_sign
from relay.models.deliveries import CALLBACK_TOKEN_MAX_AGE_SECONDS

BINDING = CallbackBinding("0b612214-0fa1-41eb-ab45-9b8b69bc4e72", "intel/torch-xpu-ops", 170001, "ab" * 20)


def test_it_reads_back_what_it_signed():
    assert callback_token_read(callback_token_sign(BINDING)) == BINDING


def test_it_remembers_when_a_token_was_signed_as_djangos_signer_wrote_it():
    before = time.time()
    token = callback_token_sign(BINDING)
    binding, signed_at = tokens._signed(token, tokens.settings.SECRET_KEY, tuple(tokens.settings.SECRET_KEY_FALLBACKS))
    assert binding == BINDING and int(before) <= signed_at <= time.time()


def test_a_remembered_token_still_expires(monkeypatch):
    token = callback_token_sign(BINDING)
    assert callback_token_read(token) == BINDING  # its signature now remembered
    later = time.time() + CALLBACK_TOKEN_MAX_AGE_SECONDS + 5
    monkeypatch.setattr(tokens.time, "time", lambda: later)
    with pytest.raises(InvalidCallbackToken, match="expired"):
        callback_token_read(token)


def test_a_remembered_token_is_refused_once_its_signing_key_is_gone(settings):
    token = callback_token_sign(BINDING)
    assert callback_token_read(token) == BINDING
    settings.SECRET_KEY = "another key entirely, the old one not kept as a fallback"
    with pytest.raises(InvalidCallbackToken, match="not one the relay signed"):
        callback_token_read(token)


def test_a_token_signed_with_a_fallback_key_is_still_read(settings):
    token = callback_token_sign(BINDING)
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "the rotated key"
    assert callback_token_read(token) == BINDING


def test_an_altered_token_is_refused_each_time():
    token = callback_token_sign(BINDING)
    altered = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    for _ in range(2):
        with pytest.raises(InvalidCallbackToken, match="not one the relay signed"):
            callback_token_read(altered)
