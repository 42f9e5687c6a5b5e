"""MQ Center settings.

Everything comes from the environment, with defaults that run the embedded quick start
(SQLite file, in-memory channel layer, filesystem Celery transport) without any server.
Production sets DATABASE_URL (mysql://, postgres://, sqlite://) and REDIS_URL.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("MQ_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DJANGO_DEBUG", False)
# Production sets DJANGO_SECRET_KEY and is refused without it. The embedded quick start (no
# DATABASE_URL) and DEBUG generate one, kept in MQ_VAR_DIR/secret_key.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG and "DATABASE_URL" in os.environ:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured("Set DJANGO_SECRET_KEY: a broker with its own database needs a secret key of its own.")
    _key_file = VAR_DIR / "secret_key"
    if not _key_file.exists():
        import secrets

        VAR_DIR.mkdir(parents=True, exist_ok=True)
        _key_file.write_text(secrets.token_urlsafe(50))
        _key_file.chmod(0o600)
    SECRET_KEY = _key_file.read_text().strip()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "*")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "csp",
    "django_celery_beat",
    "channels",
    "mqcenter",
    "topics",
    "messages.apps.MessagesConfig",
    "registry",
    "reports.apps.ReportsConfig",
]

MIDDLEWARE = [
    # First: whom a request comes from, and over which scheme (proxy headers believed only
    # from MQ_TRUSTED_PROXIES), before anything reads either.
    "mqcenter.core.proxies.ForwardedHeadersMiddleware",
    "mqcenter.middleware.ApiGuardMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # After sessions, before CommonMiddleware (Django's documented place); the API stays English.
    "mqcenter.middleware.ConsoleLocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "mqcenter.urls"
WSGI_APPLICATION = "mqcenter.wsgi.application"
ASGI_APPLICATION = "mqcenter.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The project's pages, then each messages/ capability's own (its templates/ folder).
        "DIRS": [BASE_DIR / "templates", *sorted((BASE_DIR / "messages").glob("*/templates"))],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- storage -----------------------------------------------------------------------------
VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'mqcenter.sqlite3'}"),
        # Kept between requests (a new connection costs ~1.5 ms a call); a process's threads
        # are bounded (MQ_HTTP_THREADS), so are its connections.
        conn_max_age=env_int("DB_CONN_MAX_AGE", 300),
        # No ping before each request's first query (a round trip of every produce, pull and
        # ack): a connection the server dropped (a restart) fails one request with 503, and
        # Django closes it at that request's end.
        conn_health_checks=False,
    )
}


def _database_options(db: Any) -> None:
    """Engine options of one database alias."""
    if db["ENGINE"] == "django.db.backends.mysql":
        from mqcenter.mysql_conversions import CONVERSIONS

        # READ COMMITTED: claims use SELECT ... FOR UPDATE SKIP LOCKED and must not take gap
        # locks that would serialize concurrent claimers.
        db.setdefault("OPTIONS", {}).update(
            {
                "conv": CONVERSIONS,
                "isolation_level": "read committed",
                "charset": "utf8mb4",
                "connect_timeout": env_int("DB_CONNECT_TIMEOUT", 3),
                "read_timeout": env_int("DB_READ_TIMEOUT", 30),
                "write_timeout": env_int("DB_WRITE_TIMEOUT", 30),
            }
        )
        db.setdefault("TEST", {}).update({"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_bin"})
    elif db["ENGINE"] == "django.db.backends.sqlite3":
        # WAL lets readers run beside the one writer; the busy timeout makes writers queue
        # instead of failing with "database is locked" when several threads produce at once.
        db.setdefault("OPTIONS", {}).update(
            {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            }
        )
    elif db["ENGINE"] == "django.db.backends.postgresql":
        db.setdefault("OPTIONS", {}).update({"connect_timeout": env_int("DB_CONNECT_TIMEOUT", 3)})


_database_options(DATABASES["default"])
# DATABASE_READ_URL: another node or a replica that the console's lists, the stats and the
# Spark reports read from (`mqcenter.core.db.reads_replica`); everything else, and every
# write, stays on DATABASE_URL. Unset: they read the default database too.
if os.environ.get("DATABASE_READ_URL"):
    DATABASES["read"] = dj_database_url.parse(
        os.environ["DATABASE_READ_URL"], conn_max_age=env_int("DB_CONN_MAX_AGE", 300), conn_health_checks=False
    )
    _database_options(DATABASES["read"])
MQ_READ_DATABASE = "read" if "read" in DATABASES else "default"
DATABASE_ROUTERS = ["mqcenter.core.db.ReadRouter"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "")

if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# No channel layer: no socket sends to another. Console pages are signalled by the live
# counters' Redis pub/sub (messages/stats/live.py) and re-read them, SDK wake-ups ride
# registry/wakeups.py, so a WebSocket does not depend on a channel layer and survives a Redis
# restart (it falls back to re-reading every 2 seconds).
CHANNEL_LAYERS: dict[str, dict[str, object]] = {}

# --- auth, sessions, security ------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:dashboard"
LOGOUT_REDIRECT_URL = "console:login"

# No SECURE_PROXY_SSL_HEADER: X-Forwarded-Proto is believed only from MQ_TRUSTED_PROXIES, by
# mqcenter/core/proxies.py, which sets the request's scheme.
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("MQ_TLS", False)
CSRF_COOKIE_SECURE = env_bool("MQ_TLS", False)
SECURE_SSL_REDIRECT = env_bool("MQ_TLS", False)
SECURE_HSTS_SECONDS = 31536000 if env_bool("MQ_TLS", False) else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("MQ_TLS", False)
SECURE_HSTS_PRELOAD = env_bool("MQ_TLS", False)

CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],  # the site's own ws/wss origin too (CSP Level 3)
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'self'"],
    }
}

# --- i18n, static ------------------------------------------------------------------------
# The console speaks English (the default) or Simplified Chinese, chosen by the browser's
# Accept-Language or the header's switch (a cookie); the REST API always answers in English.
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
LANGUAGE_COOKIE_HTTPONLY = True
LANGUAGE_COOKIE_SAMESITE = "Lax"
LANGUAGE_COOKIE_SECURE = env_bool("MQ_TLS", False)
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise serves from finders; keep it quiet
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True

# --- REST API ----------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["mqcenter.core.auth.TokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["mqcenter.core.auth.HasToken"],
    "DEFAULT_PARSER_CLASSES": ["mqcenter.core.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "mqcenter.core.errors.api_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["mqcenter.core.auth.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"token": os.environ.get("MQ_TOKEN_RATE", "100000/min")},
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "MQ Center broker API",
    "DESCRIPTION": "Produce, pull, acknowledge and administer messages. See API.md.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "APPEND_COMPONENTS": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    },
    "SECURITY": [{"bearer": []}],
    "AUTHENTICATION_WHITELIST": [],
    "ENUM_NAME_OVERRIDES": {
        "MessageStatusEnum": ["NEW", "RUNNING", "SUCCESS", "FAIL", "TIMEOUT", "EXPIRED", "PREPARED", "CANCELLED"],
        "AckStatusEnum": ["SUCCESS", "FAIL"],
        "EditableStatusEnum": ["NEW", "SUCCESS", "FAIL", "TIMEOUT"],
    },
    # Served from this server (no CDN), split so the CSP needs no inline script.
    # What the serializers cannot say (unknown fields refused, rules between fields, links).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "mqcenter.openapi.contract_hook"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Django refuses bodies above this before any view runs; the API answers 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MQ_MAX_BODY_BYTES", 16 * 1024 * 1024)

# --- the broker --------------------------------------------------------------------------
MQ_MAX_PRODUCE_BATCH = env_int("MQ_MAX_PRODUCE_BATCH", 1000)
MQ_MAX_DATA_BYTES = env_int("MQ_MAX_DATA_BYTES", 256 * 1024)
MQ_MAX_PULL = env_int("MQ_MAX_PULL", 500)
MQ_MAX_WAIT_SECONDS = env_int("MQ_MAX_WAIT_SECONDS", 30)
MQ_AUTO_CREATE_TOPICS = env_bool("MQ_AUTO_CREATE_TOPICS", True)
# A consumer's first registration or pull for a group the topic lacks subscribes it (start
# "latest"); off, such a pull or registration answers 404 until the group is created.
MQ_AUTO_CREATE_GROUPS = env_bool("MQ_AUTO_CREATE_GROUPS", True)
# A new topic's retries (exponential from 10 s): a lease that expires because the consumer
# died redelivers the message instead of making it a dead letter.
MQ_DEFAULT_RETRY_COUNT = env_int("MQ_DEFAULT_RETRY_COUNT", 3)
# Threads per broker process running Django (under WSGI): every request, and each attempt of
# a long-poll pull (between attempts a pull waits on the event loop, holding no thread).
# With the long-poll's claim threads (8), what bounds a process's database connections.
MQ_HTTP_THREADS = env_int("MQ_HTTP_THREADS", 32)
# 0: beat's `retry` job takes back expired leases. Above 0: every broker process does, this
# often, instead (registry/node.py), for installs without a Celery worker.
MQ_LEASE_RECOVERY_SECONDS = float(os.environ.get("MQ_LEASE_RECOVERY_SECONDS", "0"))
# Topic settings and groups are read once this often per broker process (topics/cache.py):
# a change made through another process (pause, retry policy) applies within this delay.
MQ_TOPIC_CACHE_SECONDS = float(os.environ.get("MQ_TOPIC_CACHE_SECONDS", "1.0"))
# A deleted topic's row (and so its name) is removed this long after the delete at the
# earliest: by then no broker process still holds the topic in its cache and produces to it.
MQ_TOPIC_PURGE_SETTLE_SECONDS = float(
    os.environ.get("MQ_TOPIC_PURGE_SETTLE_SECONDS", str(MQ_TOPIC_CACHE_SECONDS + 2.0))
)
# A lease outlives the execution timeout by this much, so a consumer that enforces its
# timeout still has time to report the failure before the broker takes the message back.
MQ_LEASE_GRACE_SECONDS = env_int("MQ_LEASE_GRACE_SECONDS", 5)
# Priority aging (messages/delivery/claims/aging.py): a due message's effective priority
# rises one level per this many seconds of waiting, up to 9. 0: off (plain priority order).
MQ_PRIORITY_AGING_SECONDS = float(os.environ.get("MQ_PRIORITY_AGING_SECONDS", "0"))
MQ_HEARTBEAT_SECONDS = env_int("MQ_HEARTBEAT_SECONDS", 10)
# Long-polls are woken by produce; this bounds the wait when a wake-up is lost.
# (0.5 s while the Redis subscriber is down; jittered.)
# 20 s: with 1,000 pulls waiting, a 5 s re-check costs a fifth of a core and 170 new database
# connections a second for nothing, and triples the wake latency (`python -m bench longpoll`).
MQ_FALLBACK_POLL_SECONDS = float(os.environ.get("MQ_FALLBACK_POLL_SECONDS", "20.0"))
MQ_MAX_RETRY_DELAY_SECONDS = env_int("MQ_MAX_RETRY_DELAY_SECONDS", 86400)
MQ_ADVERTISED_URL = os.environ.get("MQ_ADVERTISED_URL", "")
# Origins (scheme://host:port) besides the console's own whose pages may open its WebSockets.
MQ_CONSOLE_ORIGINS = [o.strip() for o in os.environ.get("MQ_CONSOLE_ORIGINS", "").split(",") if o.strip()]
# Addresses or networks (CIDR) of the reverse proxies whose X-Forwarded-For / X-Forwarded-Proto
# are believed (comma-separated); none by default, so a client cannot choose the address or
# scheme it is seen with. Applied by mqcenter/core/proxies.py under any server.
MQ_TRUSTED_PROXIES = [a.strip() for a in os.environ.get("MQ_TRUSTED_PROXIES", "").split(",") if a.strip()]
MQ_REDRIVE_SYNC_LIMIT = env_int("MQ_REDRIVE_SYNC_LIMIT", 10000)

# --- maintenance (Celery beat jobs: each messages/ slice's tasks.py; setup_maintenance) ----
# Archived messages (and their trace) are purged this many days after archiving.
MQ_ARCHIVE_RETENTION_DAYS = env_int("MQ_ARCHIVE_RETENTION_DAYS", 90)
# Archived history as Parquet for the Spark reports: messages/ and traces/ under this
# directory, partitioned day=YYYY-MM-DD/topic=NAME. Empty string disables the export.
MQ_ARCHIVE_PARQUET_DIR = os.environ.get("MQ_ARCHIVE_PARQUET_DIR", str(VAR_DIR / "archive"))
# Rows archived this recently wait for the next export (concurrent archive batches commit).
MQ_ARCHIVE_EXPORT_SETTLE_SECONDS = env_int("MQ_ARCHIVE_EXPORT_SETTLE_SECONDS", 10)
MQ_STATS_RETENTION_DAYS = env_int("MQ_STATS_RETENTION_DAYS", 30)
# Alarm when a topic's oldest deliverable message is older than this.
MQ_ALARM_OLDEST_AGE_SECONDS = env_int("MQ_ALARM_OLDEST_AGE_SECONDS", 600)
# At most one e-mail per topic and alarm kind per period.
MQ_ALARM_PERIOD_MINUTES = env_int("MQ_ALARM_PERIOD_MINUTES", 60)

# --- outbound calls (mqcenter/core/outbound.py) -------------------------------------------
# Calls of one check-back or webhook run at once: per business line, and in all (webhooks;
# check-backs use MQ_TRANSACTION_CHECK_CONCURRENCY). A line's slow targets wait for its own
# slots, never for the others'.
MQ_OUTBOUND_PER_BIZ = env_int("MQ_OUTBOUND_PER_BIZ", 4)
MQ_OUTBOUND_CONCURRENCY = env_int("MQ_OUTBOUND_CONCURRENCY", 32)

# --- alarm webhooks (topics/webhooks.py, messages/alarms/webhooks.py) ---------------
# The only hosts (host or host:port) a topic's alarm webhooks may name; empty: no webhook
# target can be saved, so a topic admin cannot make the broker call arbitrary addresses.
MQ_ALARM_WEBHOOK_HOSTS = env_list("MQ_ALARM_WEBHOOK_HOSTS")
MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("MQ_ALARM_WEBHOOK_TIMEOUT_SECONDS", "5"))
# A failed post is tried again this many times, after BACKOFF, 2 x BACKOFF, 4 x BACKOFF, ...
MQ_ALARM_WEBHOOK_RETRIES = env_int("MQ_ALARM_WEBHOOK_RETRIES", 5)
MQ_ALARM_WEBHOOK_BACKOFF_SECONDS = float(os.environ.get("MQ_ALARM_WEBHOOK_BACKOFF_SECONDS", "30"))

# --- message semantics (messages/delivery/produce.py, acks.py) -----------------------------
# A produce refused by a topic's max_backlog (429 backlog_full) says to retry after this.
MQ_BACKLOG_RETRY_AFTER_SECONDS = env_int("MQ_BACKLOG_RETRY_AFTER_SECONDS", 5)
# The longest snooze an ack may ask for (status RETRY with delay_seconds).
MQ_MAX_SNOOZE_SECONDS = env_int("MQ_MAX_SNOOZE_SECONDS", 86400)

# --- transactional messages (messages/transactions/services.py) ---------------------------
# The only hosts (host or host:port) a check-back may call; empty: transactional produce is
# refused, so a token cannot make the broker call arbitrary addresses.
MQ_TRANSACTION_CHECK_HOSTS = env_list("MQ_TRANSACTION_CHECK_HOSTS")
MQ_TRANSACTION_CHECK_TIMEOUT_SECONDS = float(os.environ.get("MQ_TRANSACTION_CHECK_TIMEOUT_SECONDS", "5"))
MQ_TRANSACTION_CHECK_CONCURRENCY = env_int("MQ_TRANSACTION_CHECK_CONCURRENCY", 32)
# An open transaction whose check answered "unknown" (or failed) is asked again after this.
MQ_TRANSACTION_RECHECK_SECONDS = env_int("MQ_TRANSACTION_RECHECK_SECONDS", 30)
# An open transaction this old is rolled back without asking again.
MQ_TRANSACTION_GIVE_UP_SECONDS = env_int("MQ_TRANSACTION_GIVE_UP_SECONDS", 86400)

# --- Spark reports (spark/; SPARK_MASTER, MQ_JDBC_JAR are read by spark/session.py) -------
# The heap report is also e-mailed to these addresses (all topics); each topic's
# alarm_emails get their topic's rows.
MQ_REPORT_EMAILS = env_list("MQ_REPORT_EMAILS")
# Spark reads the default database unless this JDBC URL is set (e.g. a read replica).
MQ_REPORT_JDBC_URL = os.environ.get("MQ_REPORT_JDBC_URL", "")
MQ_REPORT_JDBC_PARTITIONS = env_int("MQ_REPORT_JDBC_PARTITIONS", 8)
# A report run's Spark jobs are cancelled past this many seconds (the Celery task's own
# limits sit a little above it).
MQ_REPORT_TIME_LIMIT = env_int("MQ_REPORT_TIME_LIMIT", 3000)

# --- Celery ------------------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or REDIS_URL or "filesystem://"
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(VAR_DIR / "celery" / "queue"),
        "data_folder_out": str(VAR_DIR / "celery" / "queue"),
        "processed_folder": str(VAR_DIR / "celery" / "processed"),
        # kombu's default is ./control, which litters the working directory.
        "control_folder": str(VAR_DIR / "celery" / "control"),
        "store_processed": False,
    }
    if CELERY_BROKER_URL == "filesystem://"
    else {}
)
if CELERY_BROKER_URL == "filesystem://":
    for _folder in ("queue", "processed", "control"):
        (VAR_DIR / "celery" / _folder).mkdir(parents=True, exist_ok=True)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
# Several deployments (or test runs) can share one Redis by using queues of their own.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
# The broker's outbound HTTP calls (transaction check-backs, alarm webhooks, test sends) run
# on a queue of their own, served by a worker of its own (`celery -A mqcenter worker -Q
# <queue> -P threads -c 4`): a slow or hostile remote host never holds the worker that runs
# the maintenance jobs.
MQ_OUTBOUND_QUEUE = os.environ.get("MQ_OUTBOUND_QUEUE", f"{CELERY_TASK_DEFAULT_QUEUE}.outbound")
MQ_OUTBOUND_TASKS = ("messages.transactions.check", "messages.alarms.webhook")
CELERY_TASK_ROUTES = {task: {"queue": MQ_OUTBOUND_QUEUE} for task in MQ_OUTBOUND_TASKS}

# --- e-mail ------------------------------------------------------------------------------
EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if os.environ.get("EMAIL_HOST")
    else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "mqcenter@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("MQ_LOG_LEVEL", "INFO")},
    # httpx logs every request's whole URL at INFO: webhook URLs carry their chat tool's secret.
    "loggers": {"django.db.backends": {"level": "WARNING"}, "httpx": {"level": "WARNING"},
                "httpcore": {"level": "WARNING"}},
}
