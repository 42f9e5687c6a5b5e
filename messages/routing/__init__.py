"""Routing: subscription filters, which of a topic's groups a publish is copied to.

A group may carry a filter on a message's `tag` or an expression over its tag and headers
(`expression`, parsed by hand, never `eval`); a publish reads its topic's subscriptions under
the topic's shared lock and copies each message only to the groups whose filter matches, and
counts what each filter kept out in the publish's own transaction (`filters`). Owns no table of
its own: a filter lives on its group's row (`topics_topicgroup.filter_spec`, `filter_set_at`),
the skip counts in `topics_groupfilterskips` (both in topics/models.py), and the tag in
`mq_message.tag`.
"""
