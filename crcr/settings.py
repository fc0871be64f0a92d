"""The one settings module. Everything is driven by the environment (see README's table) and the
app runs with no configuration at all: SQLite under var/, an embedded broker, a local cache, and
sandbox mode when no GitHub App credentials are set."""

import json
import os
from pathlib import Path

import dj_database_url

from .env import env, env_bool, env_int, env_int_or_off, env_list
from .secrets import app_credentials_check, secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env("CRCR_VAR_DIR", str(BASE_DIR / "var")))
(VAR_DIR / "staticfiles").mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)

# --- the GitHub App, and sandbox mode when there is none ----------------------------------------
GITHUB_APP_ID = env("GITHUB_APP_ID")
GITHUB_APP_PRIVATE_KEY = env("GITHUB_APP_PRIVATE_KEY")
GITHUB_WEBHOOK_SECRET = env("GITHUB_WEBHOOK_SECRET")
# Some of the App's credentials but not all is a mistake (a key file not forwarded, a typo), never
# a request for sandbox mode: sandbox mode trusts its stand-in's issuers, which mint any identity.
app_credentials_check(GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY, GITHUB_WEBHOOK_SECRET)
_has_app = bool(GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY and GITHUB_WEBHOOK_SECRET)
CRCR_SANDBOX = env_bool("CRCR_SANDBOX", not _has_app)
CRCR_SANDBOX_FORCE = env_bool("CRCR_SANDBOX_FORCE", False)

# SECRET_KEY signs sessions and the callback binding: production refuses to start without a real
# one; sandbox and DEBUG runs get a random key of their own, kept under var/.
SECRET_KEY, SECRET_KEY_IS_GENERATED = secret_key(
    env("SECRET_KEY"), allow_generated=CRCR_SANDBOX or DEBUG, var_dir=VAR_DIR
)
# Previous keys, still accepted for sessions and callback tokens while a rotation settles.
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", [])
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "template_partials",
    "csp",
    "relay",
    "hud",
    "api",
]
# Development tools (bench, stand-in, sandbox: devtools/) join only when they are in the source
# tree (the production image does not copy them) and CRCR_DEVTOOLS is not off. A file check, not
# an import probe: an unrelated installed package named `devtools` must never be picked up.
CRCR_DEVTOOLS = env_bool("CRCR_DEVTOOLS", True) and (BASE_DIR / "devtools" / "apps.py").is_file()
if CRCR_DEVTOOLS:
    INSTALLED_APPS.append("devtools")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "relay.middleware.NulInUrlMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "relay.middleware.DatabaseUnavailableMiddleware",
    "relay.middleware.SlowBodyMiddleware",
    "api.middleware.ETagMiddleware",
    "hud.middleware.VisibleControlsMiddleware",
]

# The webhook and the callback skip the pages' middleware (crcr/machine.py, MACHINE_MIDDLEWARE):
# nothing a machine sends uses a session, CSRF, a login, messages, static files, CSP or ETags.
MACHINE_URLCONF = "relay.machine_urls"

ROOT_URLCONF = "crcr.urls"
WSGI_APPLICATION = "crcr.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "relay.context_processors.sandbox",
            ],
        },
    },
]

# --- database -----------------------------------------------------------------------------------
DATABASE_URL = env("DATABASE_URL", f"sqlite:///{VAR_DIR / 'crcr.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, worker and beat share one file: WAL lets readers run beside the writer, IMMEDIATE
    # transactions take the write lock up front instead of failing on upgrade, and the timeout
    # makes a busy writer wait rather than error. Connections are kept (per thread), as on
    # PostgreSQL: opening one runs the PRAGMAs and registers Django's SQL functions, which cost
    # more than a callback's own statements. The engine is Django's, with this process's write
    # transactions queued on one lock instead of in SQLite's sleeping busy handler (crcr/sqlite).
    DATABASES["default"]["ENGINE"] = "crcr.sqlite"
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file (not :memory:) so threads and worker subprocesses in tests share it; one per test
    # process so concurrent runs never share a file.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-crcr-{os.getpid()}.sqlite3")}
else:
    DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = 5
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's engine, without the health check's SELECT 1 for a connection that has just worked
    # (crcr/postgresql). prepare_threshold: the callback's hot statements (crcr/postgresql:
    # prepared_cursor) are prepared on the server once a connection has run them twice (psycopg
    # prepares on the next run); Django's own cursors bind on the client and never prepare. A
    # pooler in transaction mode needs PgBouncer 1.21+ (max_prepared_statements) for that, or
    # DATABASE_PREPARE_THRESHOLD=off.
    DATABASES["default"]["ENGINE"] = "crcr.postgresql"
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = env_int_or_off("DATABASE_PREPARE_THRESHOLD", 2)
# A read replica (PostgreSQL streaming replication) serves HUD pages and API reads; writes, the
# relay, the admin and the workers stay on the primary (crcr/dbrouter.py says which request
# reads where). Tests run it as a mirror of the test database.
DATABASE_REPLICA_URL = env("DATABASE_REPLICA_URL")
DATABASE_ROUTERS: list[str] = []
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = dj_database_url.parse(DATABASE_REPLICA_URL, conn_max_age=60, conn_health_checks=True)
    DATABASES["replica"]["OPTIONS"] = {"connect_timeout": 5}
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
    DATABASE_ROUTERS = ["crcr.dbrouter.ReplicaRouter"]
    MIDDLEWARE.append("crcr.dbrouter.ReadOnlyRequestMiddleware")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- cache, broker ------------------------------------------------------------------------------
REDIS_URL = env("REDIS_URL")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "crcr",
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = REDIS_URL or "crcrfs://"  # see crcr/broker.py
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {"visibility_timeout": 3600, "socket_connect_timeout": 2, "socket_timeout": 5}
    if REDIS_URL
    else {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        # kombu's filesystem transport sleeps this long whenever a poll finds nothing to take
        # (1 s by default): every hop of the fan-out waited for it. A listdir every 50 ms is
        # negligible; fan-out completion went from 6.6 s to under 1 s (docs/performance.md).
        "polling_interval": 0.05,
    }
)
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_PUBLISH_RETRY = True
# A broker outage at intake must not hold the webhook request: the rows are durable and the
# sweeper sends them later, so give up publishing quickly.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SOFT_TIME_LIMIT = 60
CELERY_TASK_TIME_LIMIT = 72
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# django_celery_beat's DatabaseScheduler, each entry claimed once per period (crcr/beat.py).
CELERY_BEAT_SCHEDULER = "crcr.beat:ClaimingScheduler"
CELERY_TIMEZONE = "UTC"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Celery's Django fixup closes a task thread's database connections around every task unless this
# is set (then around one task in 2 x this many); crcr/celery.py settles them as Django settles a
# request's instead.
CELERY_DB_REUSE_MAX = 1_000_000

# --- i18n, static -------------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Hashed names (css/crcr.3f2a….css) served gzip/brotli-compressed with a far-future, immutable
# Cache-Control; a changed file gets a new name. Needs `collectstatic` (runstack, the Dockerfile
# and tests/test_static_files.py run it); the rest of the test suite uses plain names.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# GitHub sends webhooks of up to 25 MB.
DATA_UPLOAD_MAX_MEMORY_SIZE = 26 * 1024 * 1024
WEBHOOK_MAX_BODY_BYTES = 25 * 1024 * 1024

# --- security (production is DEBUG off; `manage.py check --deploy` is clean with these env vars) -
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("BEHIND_TLS_PROXY", False) else None
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", SECURE_HSTS_SECONDS > 0)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", SECURE_HSTS_SECONDS > 0)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
# Content-Security-Policy (django-csp): scripts only from our own static files (htmx, plotly.js and
# ours are vendored; chart data rides in non-executable json_script blocks; the API docs use the
# split Swagger view, whose init script is a file too). Styles allow 'unsafe-inline': templates set
# CSS variables in style attributes, htmx injects its indicator style and plotly.js styles its SVG
# inline; none of that can run code. No plugin, no framing, no foreign form targets.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Messages carry untrusted values (kids, job names, repo names): escaped, one record per line.
    "formatters": {
        "plain": {"()": "crcr.logformat.EscapingFormatter", "format": "%(asctime)s %(levelname)s %(name)s %(message)s"}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}

# --- REST framework -----------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["api.permissions.ScopedWrite"],
    # JSON through relay.inputs.jsonin's one reader (its depth rule); forms as DRF reads them.
    "DEFAULT_PARSER_CLASSES": [
        "api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["api.throttling.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api": env("CRCR_API_RATE", "600/min")},
    "DEFAULT_PAGINATION_CLASS": "api.common.Cursor",
    "EXCEPTION_HANDLER": "api.common.error_handler",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # X-Forwarded-For is trusted only behind this many proxies of our own (0: the peer address).
    "NUM_PROXIES": env_int("CRCR_TRUSTED_PROXY_COUNT", 0),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "CRCR HUD API",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "LevelEnum": "relay.models.Level",
        "DeliveryOutcomeEnum": "relay.models.Delivery.Outcome",
        "AttemptOutcomeEnum": "relay.models.DispatchAttempt.Outcome",
        "KnownIssueKindEnum": "relay.models.KnownIssue.Kind",
        "KnownIssueStateEnum": "relay.models.KnownIssue.State",
        "ExpectationKindEnum": "relay.models.Expectation.Kind",
        "NotificationStateEnum": "relay.models.Notification.State",
        "NotificationAttemptOutcomeEnum": "relay.models.NotificationAttempt.Outcome",
        "EventKindEnum": "relay.models.NotificationEvent.Kind",
        "ChannelEnum": "relay.models.Subscription.Channel",
        "SubscriptionOriginEnum": "relay.models.Subscription.Origin",
    },
    "DESCRIPTION": "Read endpoints are public. Writes need `Authorization: Bearer <token>` with a personal API token "
    "created in admin, scoped `read`, `write:projects` or `admin`. Lists use cursor pagination; reads carry ETags.",
}

# --- the relay ----------------------------------------------------------------------------------
GITHUB_API_URL = env("GITHUB_API_URL", "https://api.github.com").rstrip("/")
GITHUB_HTTP_TIMEOUT = float(env("GITHUB_HTTP_TIMEOUT", "20"))
# GitHub's secondary rate limit per installation: ~900 points a minute, a write costing 5. Writes
# take them from a bucket of BURST points refilled at (PER_MINUTE - BURST) a minute, so no minute
# sees more than PER_MINUTE (relay/github/ratelimit.py); a fan-out of 90 repos goes at once.
GITHUB_WRITE_POINTS_PER_MINUTE = env_int("GITHUB_WRITE_POINTS_PER_MINUTE", 900)
GITHUB_WRITE_BURST_POINTS = env_int("GITHUB_WRITE_BURST_POINTS", 450)
GITHUB_WRITE_POINTS = env_int("GITHUB_WRITE_POINTS", 5)

CRCR_UPSTREAM_REPO = env("CRCR_UPSTREAM_REPO", "pytorch/pytorch")
# Where the demotion loop's pull requests move entries: upstream's allowlist, on its default branch.
CRCR_ALLOWLIST_PATH = env("CRCR_ALLOWLIST_PATH", ".github/allowlist.yml")
CRCR_ALLOWLIST_BRANCH = env("CRCR_ALLOWLIST_BRANCH", "main")
_upstream_id = env("CRCR_UPSTREAM_REPO_ID")
CRCR_UPSTREAM_REPO_ID = int(_upstream_id) if _upstream_id else None
CRCR_OIDC_AUDIENCE = env("CRCR_OIDC_AUDIENCE", "pytorch-cross-repo-ci-relay")
CRCR_OIDC_ISSUERS = json.loads(
    env(
        "CRCR_OIDC_ISSUERS",
        json.dumps(
            [
                {"issuer": "https://token.actions.githubusercontent.com", "kind": "github"},
                {"issuer": "https://agent.buildkite.com", "kind": "buildkite"},
                {"issuer": "https://gitlab.com", "kind": "gitlab"},
            ]
        ),
    )
)
CRCR_OIDC_LEEWAY_SECONDS = env_int("CRCR_OIDC_LEEWAY_SECONDS", 30)
# A token whose `exp` lies further ahead is refused (401): its jti must be remembered until then
# (replay), and a year-9999 `exp` does not fit a date. CI tokens live minutes (GitHub, Buildkite)
# or a job's timeout (GitLab); 31 days covers GitLab's longest.
CRCR_OIDC_MAX_LIFETIME_SECONDS = env_int("CRCR_OIDC_MAX_LIFETIME_SECONDS", 31 * 24 * 3600)
CRCR_OIDC_JWKS_COOLDOWN_SECONDS = float(env("CRCR_OIDC_JWKS_COOLDOWN_SECONDS", "30"))
# After an issuer's discovery or JWKS fetch fails, nobody fetches again for this long (callbacks
# answer 503 at once, or verify with the keys fetched before).
CRCR_OIDC_FAILURE_BACKOFF_SECONDS = float(env("CRCR_OIDC_FAILURE_BACKOFF_SECONDS", "30"))
CRCR_CALLBACK_MAX_BYTES = 2 * 1024 * 1024
# A request body must arrive within this many seconds of the request reaching the app, or the
# answer is 408 and the connection is closed (crcr/body_deadline.py): a slow client cannot hold a
# gunicorn thread. GitHub's largest webhook (25 MB) takes well under it on any real link.
CRCR_BODY_READ_SECONDS = float(env("CRCR_BODY_READ_SECONDS", "20"))
CRCR_CALLBACK_RATE_PER_MIN = env_int("CRCR_CALLBACK_RATE_PER_MIN", 100)
# How long a web process remembers which project a callback's identity belongs to (every callback
# asks; a registry change reaches callbacks within this time). 0 turns the memory off.
CRCR_REGISTRY_CACHE_SECONDS = env_int("CRCR_REGISTRY_CACHE_SECONDS", 5)
CRCR_JOB_TIMEOUT_HOURS = float(env("CRCR_JOB_TIMEOUT_HOURS", "6"))
CRCR_NEVER_STARTED_HOURS = float(env("CRCR_NEVER_STARTED_HOURS", "6"))
# Expected duration of a job with too little history to judge from (relay.results.overdue): the 3 h "overrun"
# threshold of upstream readiness (test-infra #8754); a running job past it shows as overdue.
CRCR_JOB_EXPECTED_MINUTES = float(env("CRCR_JOB_EXPECTED_MINUTES", "180"))
CRCR_REFERENCE_WORKFLOW_PATTERN = env("CRCR_REFERENCE_WORKFLOW_PATTERN", r"^(pull|trunk)$")
CRCR_REFERENCE_JOB_PATTERN = env("CRCR_REFERENCE_JOB_PATTERN", r"test \(openreg")
CRCR_LEVEL_MIN_JOBS = env_int("CRCR_LEVEL_MIN_JOBS", 20)
CRCR_LEVEL_MIN_DATA_HOURS = float(env("CRCR_LEVEL_MIN_DATA_HOURS", "72"))
"""The smallest sample a level criterion judges (relay.levels.criteria): this many jobs in its window, and
results for this long; below it the criterion reads "not enough data yet" and decides nothing."""
CRCR_CULPRIT_WINDOW = env_int("CRCR_CULPRIT_WINDOW", 100)
"""How many trunk commits back "since which commit?" looks for the last pass."""
CRCR_REFERENCE_REPORT_PATTERN = env("CRCR_REFERENCE_REPORT_PATTERN", r"test-report")
# PyTorch's public test-report bucket, read by anonymous HTTPS GET (relay.reference.reports);
# empty: the reference import does not look in S3.
CRCR_REFERENCE_ARTIFACT_BASE = env("CRCR_REFERENCE_ARTIFACT_BASE", "https://gha-artifacts.s3.amazonaws.com")
CRCR_UPSTREAM_REACT_INLINE = env_bool("CRCR_UPSTREAM_REACT_INLINE", False)
CRCR_PUBLIC_URL = env("CRCR_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")

# Outbox retry policy per kind (relay/outbox): capped, jittered exponential backoff stored on the
# row, given up after MAX_ATTEMPTS or MAX_AGE_HOURS; a sender holds its claim for LEASE_SECONDS.
CRCR_DISPATCH_MAX_ATTEMPTS = env_int("CRCR_DISPATCH_MAX_ATTEMPTS", 10)
CRCR_DISPATCH_BACKOFF_BASE_SECONDS = float(env("CRCR_DISPATCH_BACKOFF_BASE_SECONDS", "5"))
CRCR_DISPATCH_BACKOFF_MAX_SECONDS = float(env("CRCR_DISPATCH_BACKOFF_MAX_SECONDS", "900"))
CRCR_DISPATCH_MAX_AGE_HOURS = env_int("CRCR_DISPATCH_MAX_AGE_HOURS", 72)
CRCR_DISPATCH_LEASE_SECONDS = env_int("CRCR_DISPATCH_LEASE_SECONDS", 90)
CRCR_UPSTREAM_WRITE_MAX_ATTEMPTS = env_int("CRCR_UPSTREAM_WRITE_MAX_ATTEMPTS", 10)
CRCR_UPSTREAM_WRITE_BACKOFF_BASE_SECONDS = float(env("CRCR_UPSTREAM_WRITE_BACKOFF_BASE_SECONDS", "5"))
CRCR_UPSTREAM_WRITE_BACKOFF_MAX_SECONDS = float(env("CRCR_UPSTREAM_WRITE_BACKOFF_MAX_SECONDS", "900"))
CRCR_UPSTREAM_WRITE_MAX_AGE_HOURS = env_int("CRCR_UPSTREAM_WRITE_MAX_AGE_HOURS", 72)
CRCR_UPSTREAM_WRITE_LEASE_SECONDS = env_int("CRCR_UPSTREAM_WRITE_LEASE_SECONDS", 90)
CRCR_SWEEP_BATCH = env_int("CRCR_SWEEP_BATCH", 500)
CRCR_SWEEP_GRACE_SECONDS = env_int("CRCR_SWEEP_GRACE_SECONDS", 20)

# Retention (relay/ops/retention.py, every 6 h): webhook payloads and stored callback bodies are cut
# after this many days (0: kept forever); deliveries, dispatches, attempts and results stay.
CRCR_RETENTION_PAYLOAD_DAYS = env_int("CRCR_RETENTION_PAYLOAD_DAYS", 30)
CRCR_RETENTION_CALLBACK_BODY_DAYS = env_int("CRCR_RETENTION_CALLBACK_BODY_DAYS", 30)
CRCR_RETENTION_TEST_DAYS = env_int("CRCR_RETENTION_TEST_DAYS", 90)
"""The test store (relay/models/teststore.py): outcomes and tested commits older than this go (0: kept forever)."""

# --- the test store's flakiness machine (relay/policy/flakiness.py) --------------------------------
CRCR_TEST_BROKEN_AFTER = env_int("CRCR_TEST_BROKEN_AFTER", 3)
"""A test failing on this many consecutive upstream commits of a backend is broken there."""
CRCR_TEST_HEALED_AFTER = env_int("CRCR_TEST_HEALED_AFTER", 10)
"""Only this many clean passes in a row make a flaky or broken test healthy again."""
CRCR_MUTE_DAYS = env_int("CRCR_MUTE_DAYS", 14)
"""A mute's default expiry."""
CRCR_CAUSE_ISSUE_DAY_SECONDS = float(env("CRCR_CAUSE_ISSUE_DAY_SECONDS", "86400"))
"""How long a day of the cause issues' thresholds lasts (relay/checks/cause_issues.py: a policy's
window and close-after days, the day off trunk): the sandbox makes it two minutes, so an issue opens,
grows and closes within its demo."""

# --- triage and notifications -------------------------------------------------------------------
CRCR_EXPECTATION_PASSES = env_int("CRCR_EXPECTATION_PASSES", 5)
"""An expected failure that passes on this many trunk commits in a row is flagged "unexpectedly passing"."""
LOGIN_URL = "/accounts/login/"
# Notifications ride on the outbox engine (relay.outbox) with their own retry policy.
CRCR_NOTIFY_MAX_ATTEMPTS = env_int("CRCR_NOTIFY_MAX_ATTEMPTS", 8)
CRCR_NOTIFY_BACKOFF_BASE_SECONDS = float(env("CRCR_NOTIFY_BACKOFF_BASE_SECONDS", "5"))
CRCR_NOTIFY_BACKOFF_MAX_SECONDS = float(env("CRCR_NOTIFY_BACKOFF_MAX_SECONDS", "900"))
CRCR_NOTIFY_MAX_AGE_HOURS = env_int("CRCR_NOTIFY_MAX_AGE_HOURS", 48)
CRCR_NOTIFY_LEASE_SECONDS = env_int("CRCR_NOTIFY_LEASE_SECONDS", 60)
CRCR_NOTIFY_ALLOW_PRIVATE = env_bool("CRCR_NOTIFY_ALLOW_PRIVATE", CRCR_SANDBOX or DEBUG)
"""Webhooks to private and loopback addresses: refused in production (SSRF), allowed in sandbox mode."""
EMAIL_BACKEND = env(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend" if CRCR_SANDBOX else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = env("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "crcr-hud@localhost")

# --- the relay's own health: alerts (relay/health/alerts.py) and /metrics (relay/health/exposition.py) ----------------
# Upstream's dashboard rules over the health probe, its defaults; docs/admins.md, "Alerts and metrics".
CRCR_ALERT_NIGHTLY_HOURS = float(env("CRCR_ALERT_NIGHTLY_HOURS", "24"))
CRCR_ALERT_UNEXPECTED_MAX = env_int("CRCR_ALERT_UNEXPECTED_MAX", 0)
CRCR_ALERT_PASS_RATE_PRS = env_int("CRCR_ALERT_PASS_RATE_PRS", 20)
CRCR_ALERT_PASS_RATE_MIN = float(env("CRCR_ALERT_PASS_RATE_MIN", "0.95"))
CRCR_ALERT_SILENT_HOURS = float(env("CRCR_ALERT_SILENT_HOURS", "30"))
CRCR_METRICS_TOKEN = env("CRCR_METRICS_TOKEN", "")
"""The bearer token /metrics asks for; without one the main server does not serve /metrics
(`manage.py metrics_serve` serves it on a separate bind address instead)."""
CRCR_METRICS_CACHE_SECONDS = float(env("CRCR_METRICS_CACHE_SECONDS", "10"))
