"""Retry policies: how long a failed message waits before its next attempt."""

from __future__ import annotations

import random

from django.conf import settings

from topics.models import RetryStrategy, Topic


def retry_delay_seconds(topic: Topic, attempt: int) -> float:
    """Delay before the retry that follows delivery number `attempt` (1-based).

    fixed: the interval every time; linear: interval x attempt; exponential: interval x
    2^(attempt-1); random: uniformly between half and one and a half intervals (spreads
    a thundering herd of retries). Capped at MQ_MAX_RETRY_DELAY_SECONDS.
    """
    interval = float(topic.retry_interval_seconds)
    attempt = max(attempt, 1)
    if topic.retry_strategy == RetryStrategy.LINEAR:
        delay = interval * attempt
    elif topic.retry_strategy == RetryStrategy.EXPONENTIAL:
        delay = interval * (2 ** min(attempt - 1, 40))
    elif topic.retry_strategy == RetryStrategy.RANDOM:
        delay = random.uniform(0.5 * interval, 1.5 * interval)
    else:
        delay = interval
    return min(delay, float(settings.MQ_MAX_RETRY_DELAY_SECONDS))
