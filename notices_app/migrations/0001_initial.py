# Schedules, their runs and the outbox, moved here from sessions_app with their rows: the
# tables were renamed by sessions_app.0007, so this migration only adds the models to
# notices_app's state (docs/design.md §16).

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("sessions_app", "0007_schedules_move_to_notices_app"),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=[
        migrations.CreateModel(
            name='Schedule',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('session_id', models.CharField(blank=True, default='', max_length=200)),
                ('kind', models.CharField(choices=[('reminder', 'reminder'), ('prompt', 'prompt')], default='reminder', max_length=16)),
                ('text', models.TextField()),
                ('first_run_at', models.DateTimeField()),
                ('repeat_every', models.PositiveIntegerField(blank=True, null=True)),
                ('repeat_unit', models.CharField(blank=True, choices=[('minutes', 'minutes'), ('hours', 'hours'), ('days', 'days')], default='', max_length=8)),
                ('next_run_at', models.DateTimeField(blank=True, null=True)),
                ('state', models.CharField(choices=[('active', 'active'), ('done', 'done'), ('cancelled', 'cancelled')], default='active', max_length=16)),
                ('task_id', models.CharField(blank=True, default='', max_length=64)),
                ('created_at', models.DateTimeField()),
                ('cancelled_at', models.DateTimeField(blank=True, null=True)),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='jarvis_schedules', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='ScheduleRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('run_at', models.DateTimeField()),
                ('fired_at', models.DateTimeField()),
                ('session_id', models.CharField(blank=True, default='', max_length=200)),
                ('message_id', models.CharField(blank=True, default='', max_length=200)),
                ('outcome', models.CharField(default='firing', max_length=16)),
                ('schedule', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='notices_app.schedule')),
            ],
            options={
                'ordering': ['schedule', 'run_at'],
            },
        ),
        migrations.CreateModel(
            name='NoticeOutbox',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('session_id', models.CharField(max_length=200)),
                ('message_id', models.CharField(max_length=200)),
                ('payload', models.JSONField()),
                ('state', models.CharField(choices=[('pending', 'pending'), ('sending', 'sending'), ('sent', 'sent')], default='pending', max_length=16)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('next_attempt_at', models.DateTimeField()),
                ('claimed_at', models.DateTimeField(blank=True, null=True)),
                ('last_error', models.TextField(blank=True, default='')),
                ('task_id', models.CharField(blank=True, default='', max_length=64)),
                ('created_at', models.DateTimeField()),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('owner', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name_plural': 'notice outbox',
                'indexes': [models.Index(fields=['state', 'next_attempt_at'], name='outbox_due')],
                'constraints': [models.UniqueConstraint(fields=('session_id', 'message_id'), name='outbox_one_per_notice')],
            },
        ),
        migrations.AddIndex(
            model_name='schedule',
            index=models.Index(fields=['owner', 'state', 'next_run_at'], name='schedule_owner_next'),
        ),
        migrations.AddConstraint(
            model_name='schedulerun',
            constraint=models.UniqueConstraint(fields=('schedule', 'run_at'), name='schedule_run_once'),
        ),
    ])]
