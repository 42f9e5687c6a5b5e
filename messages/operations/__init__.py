"""Dead letters and bulk operations: what an operator does to many messages at once.

Dead letters grouped by normalised reason with whole-group redrive, delete and export
(`dead_letters`, `dead_letter_actions`); requeue, redrive, delete and cancel by ids or by a
filter, with a background job when a filter is large (`bulk`); moving messages to another topic
or group (`move`); replaying a topic's history into a group (`replay`); purging a deleted
topic (`purge`). Owns the table `mq_bulk_job` (the jobs and their progress).
"""
