"""Batches: messages produced together under one `batch_id`, with one completion callback.

Creating a batch stores its messages and its row (`services`, REST doors in `api`, the
console's list in `views`); every place a message finishes (success, dead letter, expiry,
cancel) counts it towards its batch in the same transaction (`progress`), and the transaction
that finishes the last member produces exactly one message to the batch's `callback_topic`.
Owns the table `mq_batch` (its members are the `mq_message` rows whose `batch_id` names it).
"""
