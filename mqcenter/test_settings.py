"""Settings for the test suite: the real MariaDB and Redis of this machine by default."""

import os

os.environ.setdefault("DATABASE_URL", "mysql://root@127.0.0.1:3306/mqcenter")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
# The test run's own key; broker and worker processes the tests start inherit it.
os.environ.setdefault("DJANGO_SECRET_KEY", "test-suite-only-" + "x" * 40)
os.environ.setdefault("MQ_VAR_DIR", os.path.join(os.path.dirname(os.path.dirname(__file__)), "var", "test"))

from mqcenter.settings import *  # noqa: F403

EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
# In-process tests have one process (no other topic cache): a deleted topic's name is free
# as soon as its purge is done. Tests of the settling itself override this.
MQ_TOPIC_PURGE_SETTLE_SECONDS = 0.0
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast test users

# Parallel test runs (several developers on one machine) each get their own test database.
DATABASES["default"].setdefault("TEST", {})["NAME"] = os.environ.get(  # noqa: F405
    "MQ_TEST_DB_NAME", "test_mqcenter"
)
# The read database (DATABASE_READ_URL) as a second connection to the test database: tests of
# the reads that may go elsewhere set MQ_READ_DATABASE = "read" and see which connection ran
# each query. Every other test reads the default database, as an installation without
# DATABASE_READ_URL does.
DATABASES["read"] = {  # noqa: F405
    **DATABASES["default"],  # noqa: F405
    "TEST": {**DATABASES["default"]["TEST"], "MIRROR": "default"},  # noqa: F405
}
MQ_READ_DATABASE = "default"
