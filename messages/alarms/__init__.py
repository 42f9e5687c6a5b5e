"""Alarms: backlog, oldest-age and dead-letter thresholds per topic.

The alarms job raises at most one alarm per topic, kind and period, e-mails the topic's alarm
addresses and posts to its webhooks (generic JSON, Slack, DingTalk, WeCom) with retries.
Owns the table `mq_alarm`.
"""
