"""One claim index: `ix_msg_priority` serves the readers `ix_msg_claim` served, one range per
priority level (messages/delivery/sql.py, `in_time_order`), so a claim and an ack rewrite one
index fewer. Dropping an index is a metadata change on InnoDB: no copy, no lock held while
rows are written."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('mq_messages', '0011_status_where_used'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='message',
            name='ix_msg_claim',
        ),
    ]
