"""The archive: finished messages leave the hot table after their topic's retention.

The cleanup job archives them, purges the archive past its own retention and exports archived
days to Parquet for the Spark reports (`services`); operators search the archive, read an
archived message with its trace and redrive copies of archived messages into the live table
(`redrive`, `selectors`, `api`, `views`). Owns the tables `mq_message_archive` and
`mq_archive_export`.
"""
