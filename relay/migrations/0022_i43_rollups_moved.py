"""The level criteria's rollup tables move from the HUD's state to the relay's (relay.levels owns
them now): Django's state only, the tables keep their names (db_table), so nothing is copied."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('relay', '0021_i44_test_store'),
        ('hud', '0002_h24roll_excused_rollups'),
    ]

    state_operations = [
        migrations.CreateModel(
            name='RollupState',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('last_id', models.BigIntegerField(default=0, help_text='the highest JobRun id seen by the last refresh')),
                ('refreshed_at', models.DateTimeField(blank=True, help_text='when the last refresh started', null=True)),
                ('finished_at', models.DateTimeField(blank=True, help_text='when a refresh last finished with nothing pending', null=True)),
                ('generation', models.BigIntegerField(default=0, help_text='a new random number from every refresh that stored rows')),
                ('open_hours', models.JSONField(default=list, help_text='hours whose jobs were still running: looked at again')),
                ('pending_hours', models.JSONField(default=list, help_text='hours found changed but not recomputed yet')),
                ('claimed_until', models.DateTimeField(blank=True, help_text='a refresh is running until then', null=True)),
                ('excused_facts', models.CharField(blank=True, default='', help_text='known issues and registry as the excused counts last saw them', max_length=200)),
            ],
            options={
                'db_table': 'hud_rollupstate',
            },
        ),
        migrations.CreateModel(
            name='ExcusedRollup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('start', models.DateTimeField()),
                ('project_id', models.IntegerField(help_text='relay.Project id (no foreign key: a derived copy)')),
                ('excused', models.IntegerField()),
            ],
            options={
                'db_table': 'hud_excusedrollup',
                'constraints': [models.UniqueConstraint(fields=('start', 'project_id'), name='excused_rollup_unique')],
            },
        ),
        migrations.CreateModel(
            name='TallyRollup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('size', models.CharField(choices=[('h', 'hour'), ('d', 'day')], max_length=1)),
                ('start', models.DateTimeField()),
                ('project_id', models.IntegerField(help_text='relay.Project id (no foreign key: a derived copy)')),
                ('kind', models.CharField(max_length=16)),
                ('tally', models.JSONField()),
            ],
            options={
                'db_table': 'hud_tallyrollup',
                'constraints': [models.UniqueConstraint(fields=('size', 'start', 'project_id', 'kind'), name='tally_rollup_unique')],
            },
        ),
    ]
    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
