"""MQ Center settings.

Everything comes from the environment, with defaults that run the embedded quick start
(SQLite file, in-memory channel layer, filesystem Celery transport) without any server.
Production sets DATABASE_URL (mysql://, postgres://, sqlite://) and REDIS_URL.
"""

from __future__ import annotations

import os
from typing import Any

import dj_database_url

from mqcenter.settings_env import BASE_DIR, VAR_DIR, env_bool, env_int, env_list

# The broker's own settings (MQ_*: limits, delivery, maintenance, outbound calls, alarms,
# transactions, reports), read from the environment the same way.
from mqcenter.settings_mq import *  # noqa: F403

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
    "mqcenter.middleware.ConsoleSessionMiddleware",
    # After sessions, before CommonMiddleware (Django's documented place); the API stays English.
    "mqcenter.middleware.ConsoleLocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "mqcenter.middleware.ConsoleAuthenticationMiddleware",
    "mqcenter.middleware.ConsoleMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "mqcenter.middleware.ApiCspMiddleware",
    "mqcenter.middleware.ConsoleHtmxMiddleware",
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

# --- Celery ------------------------------------------------------------------------------
# The embedded transport ignores the host; naming one keeps kombu from warning "No hostname
# was supplied" on every connection a worker or beat opens.
EMBEDDED_CELERY_URL = "filesystem://localhost/"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or REDIS_URL or EMBEDDED_CELERY_URL
_FILESYSTEM_TRANSPORT = CELERY_BROKER_URL.startswith("filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(VAR_DIR / "celery" / "queue"),
        "data_folder_out": str(VAR_DIR / "celery" / "queue"),
        "processed_folder": str(VAR_DIR / "celery" / "processed"),
        # kombu's default is ./control, which litters the working directory.
        "control_folder": str(VAR_DIR / "celery" / "control"),
        "store_processed": False,
    }
    if _FILESYSTEM_TRANSPORT
    else {}
)
if _FILESYSTEM_TRANSPORT:
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
