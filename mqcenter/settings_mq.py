"""The broker's own settings (MQ_*), from the environment: limits of produce and pull,
delivery, maintenance jobs, outbound calls, alarm webhooks, transactions and reports.
mqcenter/settings.py imports them all; the few derived from Django's or Celery's settings
(MQ_READ_DATABASE, MQ_OUTBOUND_QUEUE) stay beside those there. docs/configuration.md
describes each variable."""

from __future__ import annotations

import os

from mqcenter.settings_env import VAR_DIR, env_bool, env_int, env_list

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
