"""Runs inside the public relay's own virtualenv (never ours): points its callback function at the
stand-in, gives it a fresh Redis database, seeds what its webhook would have written, then serves
its local_server under uvicorn. Started by devtools.bench.public_relay; imports nothing of ours.

Only environment variables configure it where the relay reads one; the module attributes set
below are the settings it has no variable for (each says why)."""

import json
import os
import sys
import time

SEED = json.loads(open(os.environ["CRCR_PR_SEED"]).read())
REDIS_DB = int(os.environ.get("CRCR_PR_REDIS_DB", "11"))
sys.path.insert(0, os.getcwd())


def patch_trust_anchors(issuer: str, jwks_uri: str) -> None:
    """Its OIDC issuers are compiled in (GitHub's and Buildkite's): trust the stand-in's GitHub
    issuer instead, read as a GitHub token (the `repository` claim names the caller)."""
    import jwt
    from utils import jwt_helper

    jwt_helper._jwks_clients = {issuer: jwt.PyJWKClient(jwks_uri)}
    jwt_helper._REPO_EXTRACTORS = {issuer: jwt_helper._extract_repo_github}


def patch_redis_db(db: int) -> None:
    """Its Redis URL always ends in /0; the bench gives it a database of its own."""
    from utils import redis_helper

    build = redis_helper._build_url
    redis_helper._build_url = lambda config: build(config).rsplit("/", 1)[0] + f"/{db}"


def patch_stored_version_gaps() -> None:
    """The stored copies of its files are not all of one commit: the callback function reads
    `config.ci_providers_url` (empty = no Buildkite map) and the webhook module imports a
    sentinel the stored misc.py lacks. The bench never calls the webhook."""
    from utils import config, misc

    config.RelayConfig.ci_providers_url = os.environ.get("CI_PROVIDERS_URL", "")
    misc.DISPATCH_CHECK_RUN_ID = misc.DISPATCH_RUN_ID


def seed(allowlist_yaml: str, dispatches: list) -> None:
    """Flush its database, cache the allowlist (as its first fetch would) and write the
    DISPATCHED records its webhook writes when it fans a delivery out."""
    from utils import redis_helper
    from utils.config import get_config
    from utils.misc import DISPATCH_RUN_ATTEMPT, DISPATCH_RUN_ID, CallbackState

    config = get_config()
    redis_helper.create_client(config).flushdb()
    redis_helper.set_cached_yaml(config, allowlist_yaml)
    now = time.time() - 60
    for delivery, repo in dispatches:
        redis_helper.set_callback_state(
            config, delivery, repo, DISPATCH_RUN_ID, DISPATCH_RUN_ATTEMPT, CallbackState.DISPATCHED, now
        )


def main() -> None:
    patch_stored_version_gaps()
    patch_trust_anchors(SEED["issuer"], SEED["jwks_uri"])
    patch_redis_db(REDIS_DB)
    seed(SEED["allowlist_yaml"], SEED["dispatches"])
    import logging

    import uvicorn

    logging.getLogger().info("seeded %d dispatch records", len(SEED["dispatches"]))
    uvicorn.run("local_server:relay_server", host="127.0.0.1", port=int(os.environ["CRCR_PR_PORT"]), workers=1)


if __name__ == "__main__":
    main()
