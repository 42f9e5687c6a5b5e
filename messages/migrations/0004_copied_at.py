from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mq_messages', '0003_schedule_name_per_line'),
    ]

    operations = [
        migrations.AddField(
            model_name='message',
            name='copied_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='messagearchive',
            name='copied_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
